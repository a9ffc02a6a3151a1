#!/usr/bin/env bash
# Device call 9 (not run: no device time was left on 2026-12-05), carry ["build/_ab/vall.tar.xz",
# "build/_ab/forms.tar.xz"]: form j (form_j.patch on the tree's e1: step 2's left-out bits read once a warp, so that the
# check after its products waits on no load — call 8's most-sampled line) beside e1: a quick fp64 check, the time of
# both against the routed library; form k (form_k.patch on j: the consumer's uᵀ loads issued before the staging's
# stores, not after its barrier) as the tree's, j and e1 beside it. forms.tar.xz: e1 is the tree's kda2/fused.cuh.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f9; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/forms.tar.xz -C /tmp || exit 3
patch -p1 < experiments/2026-12-05-fused/form_j.patch || exit 3   # this machine's copy of the tree
mkdir -p /tmp/forms/j/kda2 && cp src/kda2/codegen/include/kda2/fused.cuh /tmp/forms/j/kda2/
patch -p1 < experiments/2026-12-05-fused/form_k.patch || exit 3
timeout 100 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider -x \
  -k "T63 or T64 or T65 or T160 or T500 or varlen or stress" > $F/test_fused.log 2>&1; echo "tests rc $?"; tail -1 $F/test_fused.log
FUSED_SPLIT=0 FUSED_FORMS="e1=/tmp/forms/e1 j=/tmp/forms/j" timeout 100 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
cp -r $F $OUT/call9
