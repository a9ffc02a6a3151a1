#!/usr/bin/env bash
# Device call 32 — prepared, not run (the session's device time ran out), carry ["build/_ab/vall.tar.xz",
# "build/_ab/cudnn_fe.tar.xz", "build/_ab/forms11.tar.xz"]: form pw (`form_pw.patch` on g: form p's idea without its
# serialized wgmmas — chunk c + 1's gate activated into a tile of its own (8 KB) and its q / k l2normed a row a thread
# on warp 4, in step c's step-4 window, with no barrier or shuffle there (warp-synchronous code in that divergent
# window made ptxas serialize every wgmma, call 30); the substitution on warp 7; step 1 only scans; 128 registers, no
# spills, no C7518) applied to the device's copy of the tree, against the fp64 reference and its model with the SASS
# check, gate_gap.py, then timed beside g (forms11/g) on P3, K10, P4.
set -u -o pipefail
F=/tmp/f32; rm -rf $F; mkdir -p $F /tmp/cudnnpkg
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg && tar xJf build/_ab/forms11.tar.xz -C /tmp || exit 3
patch -p1 -s < experiments/2026-12-05-fused/form_pw.patch || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
timeout 150 python3 -m pytest -m "gpu or compile" tests/gpu/test_fused_gpu.py "tests/test_wgmma.py::test_fused_check_kernel_compiles_to_hgmma_without_local_memory" \
  -q -s --require-gpu -p no:cacheprovider --maxfail=3 > $F/test_fused.log 2>&1
echo "tests rc $?"; grep -E "passed|failed|^E  " $F/test_fused.log | head -6
timeout 60 python3 experiments/2026-12-05-fused/gate_gap.py P3 2 > $F/gate_gap.log 2>&1; echo "gate_gap rc $?"; cat $F/gate_gap.log
FUSED_SPLIT=0 FUSED_FORMS="g=/tmp/forms11/g" timeout 240 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 P4 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call32 && cp -r $F/* $OUT/call32/
