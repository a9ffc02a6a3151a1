#!/usr/bin/env bash
# Device call 30 (H100 or H200), carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz", "build/_ab/forms11.tar.xz"]:
# form p in the device's copy of the tree (g with the gate activation and the l2norm of chunk c + 1 done in step c's
# step-4 window — warpgroup 0 the gate, warps 4 and 5 the l2norm, step 4 on warp 7 — so step 1 only scans; exp(A_log)
# and dt_bias read where used; 128 registers, no spills) against the fp64 reference and its model, the SASS check,
# gate_gap.py on P3 (p alone, the gates alternating), then timed beside g (forms11/g, e751604), the library and cuDNN-FE on P3, K10, P4.
set -u -o pipefail
F=/tmp/f30; rm -rf $F; mkdir -p $F /tmp/cudnnpkg
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg && tar xJf build/_ab/forms11.tar.xz -C /tmp || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
timeout 150 python3 -m pytest -m "gpu or compile" tests/gpu/test_fused_gpu.py "tests/test_wgmma.py::test_fused_check_kernel_compiles_to_hgmma_without_local_memory" -q -s --require-gpu -p no:cacheprovider --maxfail=3 \
  > $F/test_fused.log 2>&1; echo "tests rc $?"; grep -E "passed|failed|^E  " $F/test_fused.log | head -6
timeout 60 python3 experiments/2026-12-05-fused/gate_gap.py P3 2 > $F/gate_gap.log 2>&1; echo "gate_gap rc $?"; cat $F/gate_gap.log
FUSED_SPLIT=0 FUSED_FORMS="g=/tmp/forms11/g" timeout 240 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 P4 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call30 && cp -r $F/* $OUT/call30/
