#!/usr/bin/env bash
# Device call 6 (H200): the README's prefill table on this session's build (branch prep2 at f432065): P1-P6 with both
# gates, FLA 0.6.0 and cuDNN-FE 1.32's fused Hopper kernel in the same process on the same inputs; cuDNN's ten
# Kimi-K3 shapes (bounded gate, no FLA); the roofline chart.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
LIB=build/_vend4/kimi_linear_chunk/kimi_linear_chunk/sm_90a
el "FLA warm-up (bench option sets) and cuDNN compile, in parallel"
timeout 330 python3 -m kda2.bench.fla_warm --only bench > $O/fla_warm.log 2>&1 & W=$!
timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "probe rc $?"
wait $W; echo "warm rc $?"; tail -2 $O/fla_warm.log
el "bench P, FLA + cuDNN"
timeout 150 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus,lower_bound --out $O/p > $O/bench_p.log 2>&1
echo "p rc $?"; grep -E "^\| P" $O/p/bench_chunk.md
el "bench K3, cuDNN"
timeout 90 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes k3 --gates lower_bound --out $O/k3 > $O/bench_k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10
python3 -m kda2.bench.report --roofline $O/p/bench_chunk.json $O/roofline_p.png > $O/roofline_p.txt 2>&1
el done
tar czf $OUT/call6.tgz -C /tmp o; ls -la $OUT
