#!/usr/bin/env bash
# Device call 17, carry ["build/_ab/vall.tar.xz", "build/_ab/forms5.tar.xz"]: the tree's form w1 — one warpgroup a CTA
# (128 threads, two an SM, 241 registers: Sᵀ as two m64n128 accumulators; the producer phases on 4 warps, partial sums
# over 4) after calls 13 and 16 (cuDNN's 4-warp kernel waits 0.46 cycles an instruction at barriers, j's 8 warps
# 1.40) — against the fp64 reference (all of tests/gpu/test_fused_gpu.py), then timed beside form j and the routed
# library on P3, K10 and P4. forms5.tar.xz: forms/{j,w1}/kda2/fused.cuh.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f17; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/forms5.tar.xz -C /tmp || exit 3
cmp src/kda2/codegen/include/kda2/fused.cuh /tmp/forms/w1/kda2/fused.cuh && echo "tree = form w1"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider --maxfail=3 \
  > $F/test_fused.log 2>&1; echo "tests rc $?"; grep -E "passed|failed|^E  " $F/test_fused.log | head -8
FUSED_SPLIT=0 FUSED_FORMS="j=/tmp/forms/j" timeout 200 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 P4 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call17 && cp -r $F/* $OUT/call17/
