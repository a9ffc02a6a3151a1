#!/usr/bin/env bash
# Device call 18 (H100): ncu of the tree's form w1 (one warpgroup a CTA) on P3, bounded gate, with the sections and
# stall metrics of calls 13 (j, n2) and 16 (cuDNN): did four warps a CTA cut the barrier waits, and at what
# instruction count.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f18; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name --format=csv,noheader
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 150 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --section WarpStateStats \
  --section SchedulerStats --section InstructionStats --section LaunchStats --section Occupancy \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  python3 experiments/2026-12-05-fused/one_call.py P3 lower_bound 2 > $F/ncu_w1.txt 2>&1
echo "ncu rc $?"
grep -E "Duration|Issued Warp|Eligible Warps|No Eligible|Executed Instructions  |Warp Cycles Per Issued|Registers Per|Achieved Occ" $F/ncu_w1.txt | head -10
grep -E "issue_stalled" $F/ncu_w1.txt | awk '$NF+0 > 0.05' | sed 's/smsp__average_warps_issue_stalled_//' | head -20
mkdir -p $OUT/call18 && cp $F/* $OUT/call18/
