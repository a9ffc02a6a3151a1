#!/usr/bin/env bash
# Device call 16 (H100), carry ["build/_ab/cudnn_fe.tar.xz"]: ncu of cuDNN-FE's fused kernel on P3 (bounded gate) with
# the sections and stall metrics of call 13's j / n2 profiles: its executed instructions and issue rate, measured
# rather than counted from the source (experiments/2026-12-05-fused-study estimated 15-20 K warp instructions a
# 64 tokens).
set -u -o pipefail
F=/tmp/f16; rm -rf $F; mkdir -p $F /tmp/cudnnpkg
nvidia-smi --query-gpu=name --format=csv,noheader
tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
python3 experiments/2026-12-05-fused/one_cudnn.py P3 2 || exit 3   # compiles (NVRTC) outside the profile
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 150 $NCU --kernel-name regex:kda --launch-skip 1 --launch-count 1 --section WarpStateStats \
  --section SchedulerStats --section InstructionStats --section LaunchStats --section Occupancy \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  python3 experiments/2026-12-05-fused/one_cudnn.py P3 2 > $F/ncu_cudnn.txt 2>&1
echo "ncu rc $?"
grep -E "kda|Duration|Issued Warp|Eligible Warps|No Eligible|Executed Instructions  |Warp Cycles Per Issued|Registers Per|Block Size|Grid Size|Achieved Occ" $F/ncu_cudnn.txt | head -14
grep -E "issue_stalled" $F/ncu_cudnn.txt | awk '$NF+0 > 0.05' | sed 's/smsp__average_warps_issue_stalled_//' | head -20
mkdir -p $OUT/call16 && cp $F/* $OUT/call16/
