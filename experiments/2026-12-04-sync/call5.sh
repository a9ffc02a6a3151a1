#!/usr/bin/env bash
# Device call 5 (H200): the landed β-in-T build (cc1e77d; build/_ab/n_small_head_chunk, n_kimi_linear_chunk) against
# FLA 0.6.0 on the same inputs for the accuracy cases with the largest fp64 errors or the largest moves in call 4, at
# K = 64 and 128: FLA warmed first (12 option sets, parallel processes), then the chunk reference test with
# --fla-cases on them (≤ 5e-3 and ≤ 2× FLA's error + 1e-4). Carry build/_ab (the two builds, whl/).
set -u -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_ab/whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton FLA_FLASH_KDA=0
C=stress-beta0.999-gva2-vf,stress-g-blockedge-precomputed-vf,T63-precomputed-kf,varlen-100-300-1200-3000-4096-precomputed-gva2-noh0-kf,T8192-softplus-bf16g-gva2-H1-vf,stress-dtbias+6-softplus-vf
el "FLA warm-up"
timeout 250 python3 -m kda2.bench.fla_warm --cases $C --head-dims 64,128 --jobs 14 > $O/fla_warm.log 2>&1; echo "warm rc $?"
tail -3 $O/fla_warm.log
el tests
for K in 64 128; do
  L=build/_ab/n_kimi_linear_chunk/kimi_linear_chunk/sm_90a; [ $K = 64 ] && L=build/_ab/n_small_head_chunk/small_head_chunk/sm_90a
  ( timeout 150 python3 -m pytest -m gpu "tests/gpu/test_chunk_gpu.py::test_matches_reference" -q --require-gpu \
      --chunk-library $L --fla-cases=$C --results-dir $O/k$K -rs -p no:cacheprovider > $O/gpu_k$K.log 2>&1
    echo "K=$K rc $? $(tail -1 $O/gpu_k$K.log)" >> $O/rcs.txt ) &
done
wait; cat $O/rcs.txt
for K in 64 128; do grep -v "not compared" $O/k$K/chunk-accuracy.md | grep "^| " ; done
el done; tar czf $OUT/call5.tgz -C /tmp o
