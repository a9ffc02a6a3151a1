#!/usr/bin/env bash
# Device call 21 — prepared, not run (no device time was left), carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz"]:
# form r (`form_r.patch` on the tree's j, applied to this machine's copy with its tests: v_new = T̃ (v − (k 2^Γ) S) in
# the consumer — no w, no u, no step 5 and its CTA barrier, no uᵀ round trip; k 2^Γ 16-bit, the residual and T̃ tf32;
# modelled by chunk_model.FUSED16_RESIDUAL, FUSED16's errors within 1 %) against the fp64 reference and that model (all of
# tests/gpu/test_fused_gpu.py), then timed beside j (the tree's header before the patch), rq (`form_rq.patch`: r with
# steps 3 and 4 joined as in form q — four CTA barriers a step against j's six), rqo (`form_rqo.patch`: rq with the o
# blocks in a tile of their own — one warpgroup barrier a step fewer), w1r (`form_w1r.patch`: form w1, one warpgroup
# a CTA, in the residual form), the routed library and cuDNN-FE (carried files) on P3, K10 and P4.
set -u -o pipefail
F=/tmp/f21; rm -rf $F; mkdir -p $F /tmp/cudnnpkg /tmp/forms/j/kda2
nvidia-smi --query-gpu=name --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg || exit 3
cp src/kda2/codegen/include/kda2/fused.cuh /tmp/forms/j/kda2/
for form in rq rqo w1r; do   # their headers only (the patches' test files are skipped)
  R=/tmp/${form}t/src/kda2/codegen/include/kda2; mkdir -p $R /tmp/forms/$form/kda2 && cp src/kda2/codegen/include/kda2/fused.cuh $R/
  patch -p1 -f -s -d /tmp/${form}t < experiments/2026-12-05-fused/form_$form.patch > /dev/null
  cp $R/fused.cuh /tmp/forms/$form/kda2/
done
patch -p1 -s < experiments/2026-12-05-fused/form_r.patch || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
timeout 200 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider --maxfail=3 \
  > $F/test_fused.log 2>&1; echo "tests rc $?"; grep -E "passed|failed|^E  " $F/test_fused.log | head -8
grep -E "^fused16" $F/test_fused.log | awk '$3 == "seed" {print $6 / $11}' | sort -g | tail -1 | sed 's/^/worst o measured \/ model: /'
FUSED_SPLIT=0 FUSED_FORMS="j=/tmp/forms/j rq=/tmp/forms/rq rqo=/tmp/forms/rqo w1r=/tmp/forms/w1r" timeout 240 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 P4 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call21 && cp -r $F/* $OUT/call21/
