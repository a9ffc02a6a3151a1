#!/usr/bin/env bash
# Device call 13, carry ["build/_ab/vall.tar.xz", "build/_ab/forms4.tar.xz"]: why form n2 (fewer consumer
# instructions: uniform descriptors from one body a warpgroup, unswizzled Sᵀ copy) was slower than j — ncu's warp-state
# and scheduler sections of one P3 call (bounded gate) of each, the form's header in the tree's place; then the tree's
# form p1 (j + the unswizzled Sᵀ copy alone, one body) timed beside j and n2 on P3 and K10. forms4.tar.xz:
# forms/{e1,j,n2,p1}/kda2/fused.cuh.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f13; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp && tar xJf build/_ab/forms4.tar.xz -C /tmp || exit 3
H=src/kda2/codegen/include/kda2/fused.cuh; cp $H $F/tree_fused.cuh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for form in j n2; do
  cp /tmp/forms/$form/kda2/fused.cuh $H
  timeout 120 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --section WarpStateStats \
    --section SchedulerStats --section InstructionStats --section LaunchStats --section Occupancy \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    python3 experiments/2026-12-05-fused/one_call.py P3 lower_bound 2 > $F/ncu_$form.txt 2>&1
  echo "ncu $form rc $?"
  grep -E "Duration|Issued Warp|Eligible Warps|No Eligible|Executed Instructions  |Warp Cycles Per Issued" $F/ncu_$form.txt | head -8
  grep -E "issue_stalled" $F/ncu_$form.txt | awk '$NF+0 > 0.05' | sed 's/smsp__average_warps_issue_stalled_//' | head -20
done
cp $F/tree_fused.cuh $H
FUSED_SPLIT=0 FUSED_FORMS="j=/tmp/forms/j n2=/tmp/forms/n2" timeout 200 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 K10 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call13 && cp -r $F/* $OUT/call13/
