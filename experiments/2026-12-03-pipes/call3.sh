#!/usr/bin/env bash
# Device call (H200): step6_unroll.patch applied (the working tree's builds of the three chunk specs, sm_90a):
# unsplit outputs bit for bit against HEAD's vendored builds at K = 64, 128, 256 (v_b64, v_base, v_b256); the chunk
# GPU tests (fp64 bar, no FLA; the split module) at the three head dims; then kda2 bench P1–P6 (softplus) and the K3
# set, HEAD's K = 128 build and the patched one alternating, three rounds (no peers).
# NEW_LABEL names the patched build's column (default: step 6 unrolled), CALL the tarball (default call3); with
# TESTS_ONLY=1 the call ends after the bits and the GPU tests; GPU_TESTS names other test files, ROUNDS the rounds
# (3). (experiments/2026-12-03-prefetch runs it for calls 2, 4; 2026-12-03-stage for calls 13, 20.)
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
X=experiments/2026-12-03-wgfold/split_bench.py
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
declare -A NEW=([64]=build/small_head_chunk/sm_90a [128]=build/kimi_linear_chunk/sm_90a [256]=build/large_head_chunk/sm_90a)
declare -A OLD=([64]=build/_ab/v_b64/small_head_chunk/sm_90a [128]=build/_ab/v_base/kimi_linear_chunk/sm_90a
                [256]=build/_ab/v_b256/large_head_chunk/sm_90a)
el "bits + GPU tests"
for K in 64 128 256; do
  ( python3 $X bits ${OLD[$K]} $O/old$K.pt > $O/bits$K.log 2>&1 && python3 $X bits ${NEW[$K]} $O/new$K.pt >> $O/bits$K.log 2>&1 \
      && python3 $X cmp $O/old$K.pt $O/new$K.pt >> $O/bits$K.log 2>&1; echo "bits K=$K rc $?" >> $O/rcs.txt; rm -f $O/*$K.pt
    timeout 300 python3 -m pytest -m gpu ${GPU_TESTS:-tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py} -q --require-gpu \
      --chunk-library ${NEW[$K]} --fla-cases none --results-dir $O/acc_k$K -rs -p no:cacheprovider > $O/gpu_k$K.log 2>&1
    echo "tests K=$K rc $? $(tail -1 $O/gpu_k$K.log)" >> $O/rcs.txt ) &
done
wait; sort $O/rcs.txt
if [ "${TESTS_ONLY:-0}" = 1 ]; then tail -4 $O/bits*.log; tar czf $OUT/${CALL:-call3}.tgz -C /tmp o; exit 0; fi
el bench
for r in $(seq ${ROUNDS:-3}); do
  for L in old new; do
    LIB=${OLD[128]}; [ $L = new ] && LIB=${NEW[128]}
    timeout 80 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus --no-fla --no-cudnn \
      --out $O/p_${L}_$r > $O/p_${L}_$r.log 2>&1 || echo "p $L $r failed"
    timeout 60 python3 -m kda2.bench chunk --library $LIB --shapes k3 --no-fla --no-cudnn \
      --out $O/k3_${L}_$r > $O/k3_${L}_$r.log 2>&1 || echo "k3 $L $r failed"
  done
done
el tables
python3 - "$O" "${NEW_LABEL:-step 6 unrolled}" "${ROUNDS:-3}" <<'PY'
import json, sys
O, R = sys.argv[1], range(1, int(sys.argv[3]) + 1)
ms = lambda p: {r["id"]: r["kda2"]["ms_median"] for r in json.load(open(p + "/bench_chunk.json"))["rows"]}
for kind in ("p", "k3"):
    t = {L: [ms(f"{O}/{kind}_{L}_{r}") for r in R] for L in ("old", "new")}
    print("| shape | HEAD ms | " + sys.argv[2] + " ms |")
    for s in t["old"][0]:
        print(f"| {s} | " + " | ".join(" / ".join(f"{x[s]:.4f}" for x in t[L]) for L in ("old", "new")) + " |")
PY
tar czf $OUT/${CALL:-call3}.tgz -C /tmp o
