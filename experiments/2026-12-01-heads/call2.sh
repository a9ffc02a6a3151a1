#!/usr/bin/env bash
# Device call 2 (H200): the chunk benchmark at K = V = 64 and 256 against FLA 0.6 (P shapes, H scaled by 128/K,
# softplus gate, V-first), after warming FLA's Triton kernels for those twelve option sets in parallel processes
# (call 1's benchmark compiled them inside the timed run and ran out of time).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton FLA_FLASH_KDA=0
el "fla warm"
timeout 260 python3 experiments/2026-12-01-heads/warm_bench.py > $O/warm_bench.log 2>&1; echo "warm rc $?"
awk '{print $NF, $(NF-1), $0}' $O/warm_bench.log | cut -c1-120 | head -14
for K in 64 256; do
  el "bench K=$K"
  timeout 150 python3 -m kda2.bench chunk --head-dim $K --gates softplus --no-cudnn --iters 10 --out $O/bench_k$K \
    > $O/bench_k$K.log 2>&1; echo "bench K=$K rc $?"; grep -E "^ *P[1-6]" $O/bench_k$K.log
done
el done
tar czf $OUT/call2.tgz -C /tmp o
