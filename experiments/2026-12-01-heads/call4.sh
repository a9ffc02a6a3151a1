#!/usr/bin/env bash
# Device call 4 (H200): the chunk benchmark at K = V = 64 and 256 against FLA 0.6 with the tuned dispatch (call 3's
# records, rebuilt locally), after warming FLA's twelve option sets; meanwhile the K = 128 chunk GPU tests on
# kimi_linear_chunk against the fp64 reference (FLA comparisons off: its K = 128 Triton kernels would take the
# session's remaining minutes to compile) — the K = 128 kernels' source changed with the head-dim mapping.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton FLA_FLASH_KDA=0
el "fla warm + K=128 tests"
( timeout 260 python3 experiments/2026-12-01-heads/warm_bench.py > $O/warm_bench.log 2>&1; echo "warm rc $?" ) &
timeout 250 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
  --chunk-library build/kimi_linear_chunk/sm_90a/manifest.json --fla-cases=none -rs -p no:cacheprovider \
  > $O/gpu_kimi_chunk.log 2>&1
echo "K=128 tests rc $?"; tail -1 $O/gpu_kimi_chunk.log; grep -E "^FAILED|^ERROR" $O/gpu_kimi_chunk.log | head -20
wait
for K in 64 256; do
  el "bench K=$K"
  timeout 150 python3 -m kda2.bench chunk --head-dim $K --gates softplus --no-cudnn --iters 10 --out $O/bench_k$K \
    > $O/bench_k$K.log 2>&1; echo "bench K=$K rc $?"; grep -E "^ *P[1-6]" $O/bench_k$K.log
done
el done
tar czf $OUT/call4.tgz -C /tmp o
