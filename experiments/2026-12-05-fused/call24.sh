#!/usr/bin/env bash
# Device call 24 (H200 or H100), carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz", "build/_ab/forms7.tar.xz"]:
# form a in the tree (form r with the inputs' and o's addresses as pointers set once and advanced a chunk a step, the
# per-step index arithmetic 32-bit: 64-bit index arithmetic was ≈ 10 % of r's instructions, call 23) and form e
# (forms7/e: a, with R's and oᵀ's first products issued right after step 2 so that they run through steps 3 and 4 —
# Sᵀ's copy staged at the end of the step before, the partial sums in a tile of their own; 4–8 bytes of spills) each
# against the fp64 reference and their model (all of tests/gpu/test_fused_gpu.py), then timed beside r (forms7/r,
# HEAD's), the routed library and cuDNN-FE on P3, K10, P4.
set -u -o pipefail
F=/tmp/f24; rm -rf $F; mkdir -p $F /tmp/cudnnpkg
nvidia-smi --query-gpu=name --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg && tar xJf build/_ab/forms7.tar.xz -C /tmp || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
H=src/kda2/codegen/include/kda2/fused.cuh
cp $H /tmp/forms7/a.cuh
for form in a e; do
  cp /tmp/forms7/$([ $form = a ] && echo a.cuh || echo e/kda2/fused.cuh) $H
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider --maxfail=3 \
    > $F/test_fused_$form.log 2>&1; echo "tests $form rc $?"; grep -E "passed|failed|^E  " $F/test_fused_$form.log | head -6
done
cp /tmp/forms7/a.cuh $H
FUSED_SPLIT=0 FUSED_FORMS="r=/tmp/forms7/r e=/tmp/forms7/e" timeout 240 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 P4 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call24 && cp -r $F/* $OUT/call24/
