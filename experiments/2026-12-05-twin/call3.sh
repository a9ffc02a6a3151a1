#!/usr/bin/env bash
# Device call 3 (H200), carry ["build/_ab/routed_twin.tar.xz", "build/_ab/cudnn_fe.tar.xz"]: the routed kimi_linear_chunk
# build with the tuning record of call 2 (its P3-class rows on the fused twin where the tuner chose it) against cuDNN-FE
# 1.32's fused Hopper KDA forward in the same process: P1-P6 and cuDNN's ten Kimi-K3 shapes with the bounded gate, then
# P1-P6 softplus (kda2 alone: FLA's Triton warm-up does not fit this call), and the routed build's GPU tests of the
# twin and the chunk library. On an H100: TAR=routed_h100 LIB=build/_h100/kimi_linear_chunk/sm_90a, the routed build of
# specs/kimi_linear_chunk.yaml (the spec targeting h100), which routes by tuning/kimi_linear_chunk.h100.json (call 2).
set -u -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/cudnnpkg
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
tar xJf build/_ab/${TAR:-routed_twin}.tar.xz && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg || exit 3
export PYTHONPATH=$PWD/src:/tmp/cudnnpkg CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
LIB=${LIB:-build/kimi_linear_chunk/sm_90a}
snap() { mkdir -p $OUT/call3 && cp -r $O/* $OUT/call3/; }
el "cuDNN compile"
timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "cudnn probe rc $?"
el "bench P1-P6 bounded gate (cuDNN)"
timeout 90 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes p --gates lower_bound --out $O/plb > $O/bench_plb.log 2>&1
echo "p lb rc $?"; grep -E "^\| P" $O/plb/bench_chunk.md; snap
el "bench K3 (cuDNN, bounded gate)"
timeout 90 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes k3 --gates lower_bound --out $O/k3 > $O/bench_k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10; snap
el "bench P1-P6 softplus (kda2 alone)"
timeout 60 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes p --gates softplus --out $O/psp > $O/bench_psp.log 2>&1
echo "p sp rc $?"; grep -E "^\| P" $O/psp/bench_chunk.md; snap
el "GPU tests of the routed build"
timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_fused_twin_gpu.py tests/gpu/test_chunk_gpu.py --chunk-library $LIB/manifest.json \
  --fla-cases none -q -p no:cacheprovider -rs > $O/tests.log 2>&1
echo "tests rc $?"; grep -E "passed|failed|^FAILED|SKIPPED" $O/tests.log | head -8
el done; snap
