#!/usr/bin/env bash
# Device call (H200), carry ["build/_ab/routed_twin.tar.xz", "build/_ab/cudnn_fe.tar.xz", "build/_ab/whl"]: the routed
# kimi_linear_chunk build (tuning/kimi_linear_chunk.h200.json with the twins and P4's mixed class) — its chunk GPU
# suite (the chunk cases, the twin's, the split's with the long-memory cases, the overlap's) while FLA 0.6.0 warms its
# Triton kernels and cuDNN-FE 1.32 compiles; then P1-P6 softplus against FLA and cuDNN (its gate precomputed) in one
# process with the roofline chart, cuDNN's ten Kimi-K3 shapes and P1-P6 on the bounded gate against cuDNN; last, P3 at
# four A_log values on both gates (is the twin's softplus cost in the data: channels its middle-row anchor leaves out?).
set -u -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/cudnnpkg
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
tar xJf build/_ab/routed_twin.tar.xz && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_ab/whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:/tmp/site:/tmp/cudnnpkg TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake FLA_FLASH_KDA=0
LIB=build/kimi_linear_chunk/sm_90a
snap() { tar czf $OUT/bench.tgz -C /tmp o; }
el "FLA warm-up, cuDNN compile, GPU tests of the routed build"
( timeout 240 python3 experiments/2026-12-03-peers/warm_p_new.py "" > $O/fla_warm.log 2>&1; echo "warm rc $?" >> $O/rcs.txt ) &
( timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "cudnn probe rc $?" >> $O/rcs.txt ) &
timeout 250 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_fused_twin_gpu.py \
  tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py --chunk-library $LIB/manifest.json \
  --fla-cases none -q -p no:cacheprovider -rs > $O/tests.log 2>&1
echo "tests rc $?"; grep -E "passed|failed|^FAILED|^SKIPPED|^ERROR" $O/tests.log | head -12
wait; cat $O/rcs.txt; grep -c " ok" $O/fla_warm.log; grep -i fail $O/fla_warm.log | head -3; snap
el "bench P1-P6 softplus (FLA + cuDNN)"
timeout 110 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus --out $O/psp > $O/bench_psp.log 2>&1
echo "p softplus rc $?"; grep -E "^\| P" $O/psp/bench_chunk.md
python3 -m kda2.bench.report --roofline $O/psp/bench_chunk.json $O/roofline_p.png > $O/roofline_p.txt 2>&1; snap
el "bench K3 (cuDNN, bounded gate)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes k3 --gates lower_bound --out $O/k3 > $O/bench_k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10; snap
el "bench P1-P6 bounded gate (cuDNN)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes p --gates lower_bound --out $O/plb > $O/bench_plb.log 2>&1
echo "p lb rc $?"; grep -E "^\| P" $O/plb/bench_chunk.md
el "P3: where the twin's softplus time goes — every head's A_log set (weak to strong decay), both gates, kda2 alone"
for al in -4 -2 0 1; do for gate in softplus lower_bound; do
  timeout 40 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P3 --gates $gate --a-log $al \
    --out $O/alog/$gate$al > $O/alog_$gate$al.log 2>&1
  echo "a_log $al $gate rc $? $(grep -E '^\| P3' $O/alog/$gate$al/bench_chunk.md | head -1)"
done; done
el done; snap
