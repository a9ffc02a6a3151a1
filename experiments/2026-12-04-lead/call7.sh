#!/usr/bin/env bash
# Device call 7 (H200): the chunk state pass asks L2 for the slot of chunk cc + SLOT_LEAD as it requests chunk cc's
# tiles (chunk.cuh slot_l2_ahead; plain launches on sm_90). Routed Kimi chunk builds, vendored: HEAD's (build/_ab/chead),
# SLOT_LEAD 2 (cl2, the working tree) and 4 (cl4). Outputs bit for bit cl2 vs chead (unsplit cases), the chunk GPU tests
# on cl2 (K = 128, split and overlap modules); then P1-P6 softplus, P1-P6 lower-bound and the K3 set per library,
# alternating, two rounds (no peers).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
X=experiments/2026-12-03-wgfold/split_bench.py
declare -A LIB=([chead]=build/_ab/chead/kimi_linear_chunk/sm_90a [cl2]=build/_ab/cl2/kimi_linear_chunk/sm_90a
                [cl4]=build/_ab/cl4/kimi_linear_chunk/sm_90a)
el "bits + GPU tests"
( python3 $X bits ${LIB[chead]} $O/old.pt > $O/bits.log 2>&1 && python3 $X bits ${LIB[cl2]} $O/new.pt >> $O/bits.log 2>&1 \
    && python3 $X cmp $O/old.pt $O/new.pt >> $O/bits.log 2>&1; echo "bits rc $?"; rm -f $O/*.pt; tail -3 $O/bits.log ) &
timeout 300 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py \
  -q --require-gpu --chunk-library ${LIB[cl2]} --fla-cases none --results-dir $O/acc -rs -p no:cacheprovider > $O/gpu.log 2>&1
echo "tests rc $? $(tail -1 $O/gpu.log)"; grep -E "^FAILED|^ERROR" $O/gpu.log | head -5
wait
el bench
for r in 1 2; do for L in chead cl2 cl4; do
  timeout 80 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes p --gates softplus --no-fla --no-cudnn \
    --out $O/p_${L}_$r > $O/p_${L}_$r.log 2>&1 || echo "p $L $r failed"
  timeout 80 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes p --gates lower_bound --no-fla --no-cudnn \
    --out $O/pb_${L}_$r > $O/pb_${L}_$r.log 2>&1 || echo "pb $L $r failed"
  timeout 60 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes k3 --no-fla --no-cudnn \
    --out $O/k3_${L}_$r > $O/k3_${L}_$r.log 2>&1 || echo "k3 $L $r failed"
done; done
el tables
python3 - "$O" <<'PY' | tee $O/table.md
import json, sys
O = sys.argv[1]
ms = lambda p: {r["id"]: r["kda2"]["ms_median"] for r in json.load(open(p + "/bench_chunk.json"))["rows"]}
for kind, what in (("p", "softplus"), ("pb", "lower-bound"), ("k3", "K3, lower-bound")):
    t = {L: [ms(f"{O}/{kind}_{L}_{r}") for r in (1, 2)] for L in ("chead", "cl2", "cl4")}
    print(f"\n{what}\n\n| shape | HEAD ms | SLOT_LEAD 2 ms | SLOT_LEAD 4 ms |\n|---|---|---|---|")
    for s in t["chead"][0]:
        print(f"| {s} | " + " | ".join(" / ".join(f"{x[s]:.4f}" for x in t[L]) for L in ("chead", "cl2", "cl4")) + " |")
PY
tar czf $OUT/call7.tgz -C /tmp o
