#!/usr/bin/env bash
# Device call 11, carry ["build/_ab/vall.tar.xz", "build/_ab/forms3.tar.xz"]: the tree's form n2 (form j + the
# consumer one body a warpgroup, so its descriptors are uniform, + Sᵀ's copy in unswizzled core matrices, so its
# stmatrix addresses are a base plus constants) against the fp64 reference (all of tests/gpu/test_fused_gpu.py),
# then timed beside forms e1, j and n (n2 with the 128-byte swizzle: spills 8 addresses), the routed library and
# (bounded gate, where importable) cuDNN-FE's fused kernel on P3, K10 and P4. forms3.tar.xz:
# forms/{e1,j,n,n2,o}/kda2/fused.cuh; o = n2 + the copies' offsets as one 64 × 32-bit product each.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f11; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/forms3.tar.xz -C /tmp || exit 3
cmp src/kda2/codegen/include/kda2/fused.cuh /tmp/forms/n2/kda2/fused.cuh && echo "tree = form n2"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider \
  > $F/test_fused.log 2>&1; echo "tests rc $?"; grep -E "passed|failed|Error" $F/test_fused.log | tail -5
FUSED_SPLIT=0 FUSED_FORMS="e1=/tmp/forms/e1 j=/tmp/forms/j n=/tmp/forms/n o=/tmp/forms/o" timeout 300 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 P4 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call11 && cp -r $F/* $OUT/call11/
