#!/usr/bin/env bash
# Device call 6 (H200): issue 12's peer line with today's chunk library (wgmma state pass, tuned routes): kda2 vs
# cuDNN-FE 1.32's fused Hopper KDA (its raw launch, kda2.bench.cudnn_peer) in the same process — P1-P6 with both gates
# (softplus: cuDNN gets the precomputed fp32 gate, timed with and without that prep, non-finite results marked) and
# cuDNN's ten Kimi-K3 shapes (bounded gate); FLA not timed here (its figures: README, 2026-12-01 call 8). Then the
# roofline charts and tables.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/nvidia_cudnn_frontend-1.32*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
LIB=build/_vend2/chunk/kimi_linear_chunk/sm_90a
el "cuDNN probe + compile"
timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "probe rc $?"; tail -5 $O/cudnn_probe.log
for set in k3 p; do
  el "bench $set"
  if [ $set = k3 ]; then args="--shapes k3 --gates lower_bound"; else args="--shapes p --gates softplus,lower_bound"; fi
  timeout 240 python3 -m kda2.bench chunk --no-fla --library $LIB $args --out $O/$set > $O/bench_$set.log 2>&1
  echo "bench $set rc $?"; cat $O/$set/bench_chunk.md 2>/dev/null | head -40
  python3 -m kda2.bench.report --roofline $O/$set/bench_chunk.json $O/roofline_$set.png > $O/roofline_$set.txt 2>&1
done
el done
tar czf $OUT/call6.tgz -C /tmp o
