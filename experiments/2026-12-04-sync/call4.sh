#!/usr/bin/env bash
# Device call 4 (H200): tbeta.patch (on 284c36d) — β folded into T's columns (w = (T diag β)(k 2^Γ),
# u = (T diag β) v: step 4 no longer scales k by β nor reads and rewrites v). Not the same bits: the working tree's
# three chunk specs (build/_ab/n_<spec>) against HEAD's (v_base, v_b64, v_b256: pre-bar builds, the same bits as HEAD)
# case by case (split_bench bits / cmp: how far apart), the chunk GPU tests with the overlap module at K = 64, 128,
# 256 with their accuracy tables (acc_k*: fp64 errors to set beside call 2's), then HEAD (v_head, 284c36d's K = 128
# build) and tbeta alternating, three rounds. Carry build/_ab.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
for s in small_head_chunk kimi_linear_chunk large_head_chunk; do
  mkdir -p build/$s; rm -rf build/$s/sm_90a; ln -s "$PWD/build/_ab/n_$s/$s/sm_90a" build/$s/sm_90a
done
O=/tmp/o
GPU_TESTS="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py" \
  TESTS_ONLY=1 CALL=call4 bash experiments/2026-12-03-pipes/call3.sh 2>&1 | grep -v "^tail:"
declare -A LIB=([old]=build/_ab/v_head/kimi_linear_chunk/sm_90a [new]=build/_ab/n_kimi_linear_chunk/kimi_linear_chunk/sm_90a)
for r in 1 2 3; do
  for L in old new; do
    timeout 90 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes p --gates softplus --no-fla --no-cudnn \
      --out $O/p_${L}_$r > $O/p_${L}_$r.log 2>&1 || echo "p $L $r rc $?"
    timeout 60 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes k3 --no-fla --no-cudnn \
      --out $O/k3_${L}_$r > $O/k3_${L}_$r.log 2>&1 || echo "k3 $L $r rc $?"
  done
done
python3 - "$O" <<'PY' | tee $O/table.md
import json, sys
O, R, Ls = sys.argv[1], (1, 2, 3), ("old", "new")
ms = lambda p: {r["id"]: r["kda2"]["ms_median"] for r in json.load(open(p + "/bench_chunk.json"))["rows"]}
for kind in ("p", "k3"):
    t = {L: [ms(f"{O}/{kind}_{L}_{r}") for r in R] for L in Ls}
    print("| shape | HEAD ms | β in T ms |\n|---|---|---|")
    for s in t["old"][0]:
        print(f"| {s} | " + " | ".join(" / ".join(f"{x[s]:.4f}" for x in t[L]) for L in Ls) + " |")
PY
tar czf $OUT/call4.tgz -C /tmp o
