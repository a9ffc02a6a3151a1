#!/usr/bin/env bash
# Device call 20 (H100), carry ["build/_ab/vall.tar.xz", "build/_ab/forms6.tar.xz"]: form q (`form_q.patch` on the
# tree's j, applied to this machine's copy: steps 3 and 4 joined — warp 0 sums A's partials itself, a row-half a
# lane, and solves for T̃ after a warp barrier while warps 1..7 make Aqk: one CTA barrier fewer a step, against j's
# 1.40 barrier stall cycles an instruction, call 13) against the fp64 reference (all of tests/gpu/test_fused_gpu.py),
# then timed beside j and the routed library on P3, K10, P4.
# forms6.tar.xz: forms/{j,q}/kda2/fused.cuh.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f20; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/forms6.tar.xz -C /tmp || exit 3
patch -p1 -s < experiments/2026-12-05-fused/form_q.patch || exit 3
cmp src/kda2/codegen/include/kda2/fused.cuh /tmp/forms/q/kda2/fused.cuh && echo "tree = form q"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider --maxfail=3 \
  > $F/test_fused.log 2>&1; echo "tests rc $?"; grep -E "passed|failed|^E  " $F/test_fused.log | head -8
FUSED_SPLIT=0 FUSED_FORMS="j=/tmp/forms/j" timeout 200 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 P4 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call20 && cp -r $F/* $OUT/call20/
