#!/usr/bin/env bash
# Device call 29 (H100 or H200), carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz", "build/_ab/forms10.tar.xz"]:
# form s4 in the device's copy of the tree (g with step 4 by 8 × 8 blocks: T11 and T22 solved side by side by lanes
# 0..15, chains of 8 rows, then T21 = −T22 A21 T11 by lanes 16..23; a few bytes of spills at the 128-register cap)
# against the fp64 reference and its model, then timed beside g (forms10/g, e751604), the library and cuDNN-FE on
# P3, K10, P4.
set -u -o pipefail
F=/tmp/f29; rm -rf $F; mkdir -p $F /tmp/cudnnpkg
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg && tar xJf build/_ab/forms10.tar.xz -C /tmp || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
timeout 150 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider --maxfail=3 \
  > $F/test_fused.log 2>&1; echo "tests rc $?"; grep -E "passed|failed|^E  " $F/test_fused.log | head -6
FUSED_SPLIT=0 FUSED_FORMS="g=/tmp/forms10/g" timeout 240 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 P4 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call29 && cp -r $F/* $OUT/call29/
