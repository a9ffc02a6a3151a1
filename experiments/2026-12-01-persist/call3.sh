#!/usr/bin/env bash
# Device call 3 (H200): where a one-sequence decode step's 4.4-4.7 us under graph replay goes (issue 13 item 5,
# <= 4 us): the graph node floor of this GPU (graph_floor.py), then ncu of the routed D1 and D2 kernels (duration,
# DRAM throughput, warp stalls).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 experiments/2026-12-01-persist/graph_floor.py | tee $O/graph_floor.json
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu); echo "ncu: $NCU"
for S in D1 D2; do for L in v_first k_first; do
  el "ncu $S $L"
  timeout 150 $NCU --kernel-name regex:kda2_recurrent --launch-skip 40 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis \
    python3 -m kda2.bench recurrent --no-fla --library build/kimi_linear_recurrent --shapes $S --layouts $L --quick \
    --out $O/ncu_${S}_$L > $O/ncu_${S}_$L.txt 2>&1; echo "rc $?"
  grep -E "kda2_recurrent|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size|Eligible Warps|Issued Warp|Stall|Waves Per SM" $O/ncu_${S}_$L.txt | head -24
done; done
el done
tar czf $OUT/call3.tgz -C /tmp o
