#!/usr/bin/env bash
# Device call 2 (H200): ncu of M1 v_first (N = 64, T = 4) — HEAD's route in HEAD's routed library (build/_ab/rec)
# against the same variant in the block-form build (build/_ab/all.tar.xz; call 1: 79 -> 111 us) — occupancy, the
# shared-memory configuration the driver chose, warp states, per-SASS stall samples.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
tar xJf build/_ab/all.tar.xz -C /tmp/ab || exit 3
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
run() {  # name library
  timeout 120 $NCU --kernel-name regex:kda2 --launch-skip 3 --launch-count 1 --set full -o $O/$1 \
    python3 experiments/2026-12-02-ring/one_call.py $2 v_first 64 4 4 > $O/$1.log 2>&1
  echo "ncu $1 rc $?"; tail -1 $O/$1.log
  $NCU -i $O/$1.ncu-rep --page details > $O/$1_details.txt 2>&1
  $NCU -i $O/$1.ncu-rep --page source --csv --print-source sass > $O/$1_sass.csv 2>&1
  grep -E "^  [a-z_0-9]+ |Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|DRAM Throughput|Theoretical Occ|Block Limit|Shared Memory Config|Driver Shared|Dynamic Shared|Static Shared|Executed Ipc A|Executed Instructions  " \
    $O/$1_details.txt | head -30
}
run m1_head build/_ab/rec/kimi_linear_recurrent
run m1_block /tmp/ab/build/_all/kimi_linear_recurrent
rm -f $O/*.ncu-rep
tar czf $OUT/call2.tgz -C /tmp o
