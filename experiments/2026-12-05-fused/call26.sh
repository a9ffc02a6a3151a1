#!/usr/bin/env bash
# Device call 26 (H200 wanted), carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz", "build/_ab/forms9.tar.xz"]:
# the tree's form (g: a's addresses, Sᵀ's 16-bit fragments as register A, calls 24–25) against the fp64 reference and
# its model (tests/gpu/test_fused_gpu.py) and the no-local-memory SASS test, then timed beside r (forms9/r, 7988dba's
# form), the routed library and cuDNN-FE on P3, P4 and cuDNN's ten Kimi-K3 shapes.
set -u -o pipefail
F=/tmp/f26; rm -rf $F; mkdir -p $F /tmp/cudnnpkg
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg && tar xJf build/_ab/forms9.tar.xz -C /tmp || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
timeout 150 python3 -m pytest -m "gpu or compile" tests/gpu/test_fused_gpu.py "tests/test_wgmma.py::test_fused_check_kernel_compiles_to_hgmma_without_local_memory" \
  -q -s --require-gpu -p no:cacheprovider --maxfail=3 > $F/test_fused.log 2>&1
echo "tests rc $?"; grep -E "passed|failed|^E  " $F/test_fused.log | head -6
FUSED_SPLIT=0 FUSED_FORMS="r=/tmp/forms9/r" timeout 300 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 P4 K1 K2 K3 K4 K5 K6 K7 K8 K9 K10 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call26 && cp -r $F/* $OUT/call26/
