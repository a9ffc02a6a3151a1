#!/usr/bin/env bash
# Device call 27 (H200 wanted), carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz"]: the tree's fused form
# (g, e751604) on the H200 beside the routed library and cuDNN-FE — the fp64 tests and the SASS check; gate_gap.py on
# P3 (the fused kernel alone, the gates alternating: is softplus's extra time in call 26 the kernel's?); then P3, P4
# and cuDNN's ten Kimi-K3 shapes (call 26's set, on the H200).
set -u -o pipefail
F=/tmp/f27; rm -rf $F; mkdir -p $F /tmp/cudnnpkg
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
timeout 150 python3 -m pytest -m "gpu or compile" tests/gpu/test_fused_gpu.py "tests/test_wgmma.py::test_fused_check_kernel_compiles_to_hgmma_without_local_memory" \
  -q -s --require-gpu -p no:cacheprovider --maxfail=3 > $F/test_fused.log 2>&1
echo "tests rc $?"; grep -E "passed|failed|^E  " $F/test_fused.log | head -6
timeout 60 python3 experiments/2026-12-05-fused/gate_gap.py P3 3 > $F/gate_gap.log 2>&1; echo "gate_gap rc $?"; cat $F/gate_gap.log
FUSED_SPLIT=0 timeout 300 python3 experiments/2026-12-05-fused/time_fused.py /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json \
  P3 P4 K1 K2 K3 K4 K5 K6 K7 K8 K9 K10 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call27 && cp -r $F/* $OUT/call27/
