#!/usr/bin/env bash
# Device call 25 (H200 or H100), carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz", "build/_ab/forms8.tar.xz"]:
# form a in the tree (call 24) and form g (forms8/g: a with Sᵀ's 16-bit A fragments packed from its own accumulators —
# a 16-bit m64n16k16 register fragment is the accumulator's order — two k-steps' sets in turn, so no copy of Sᵀ is
# staged: 8 stmatrix, a proxy fence and a warpgroup barrier a step fewer, the R / oᵀ products' A read from registers),
# each against the fp64 reference and their model (tests/gpu/test_fused_gpu.py), then timed beside r (HEAD's), the
# routed library and cuDNN-FE on P3, K10, P4.
set -u -o pipefail
F=/tmp/f25; rm -rf $F; mkdir -p $F /tmp/cudnnpkg
nvidia-smi --query-gpu=name --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg && tar xJf build/_ab/forms8.tar.xz -C /tmp || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
H=src/kda2/codegen/include/kda2/fused.cuh
cp $H /tmp/forms8/a.cuh
for form in g; do   # (a: call 24)
  cp /tmp/forms8/$([ $form = a ] && echo a.cuh || echo g/kda2/fused.cuh) $H
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider --maxfail=3 \
    > $F/test_fused_$form.log 2>&1; echo "tests $form rc $?"; grep -E "passed|failed|^E  " $F/test_fused_$form.log | head -6
done
cp /tmp/forms8/a.cuh $H
FUSED_SPLIT=0 FUSED_FORMS="r=/tmp/forms8/r g=/tmp/forms8/g" timeout 240 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 P4 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call25 && cp -r $F/* $OUT/call25/
