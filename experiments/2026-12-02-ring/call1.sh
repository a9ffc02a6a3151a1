#!/usr/bin/env bash
# Device call 1 (H200): ncu of the routed Kimi recurrent kernels where issue 13 is short of its bar — M1 (N = 64,
# T = 4) both layouts, D3 (N = 256) k_first, D2 (N = 64) both — details (throughput, occupancy, warp states) and
# per-SASS stall samples, to decide between overlapping tiles (a ring) and fewer instructions.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/vH.tar.xz -C /tmp/ab || exit 3
L=/tmp/ab/kimi_linear_recurrent
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
run() {  # name layout N T
  timeout 100 $NCU --kernel-name regex:kda2 --launch-skip 3 --launch-count 1 --set full --import-source yes \
    -o $O/$1 python3 experiments/2026-12-02-ring/one_call.py $L $2 $3 $4 4 > $O/$1.log 2>&1
  echo "ncu $1 rc $?"; tail -1 $O/$1.log
  $NCU -i $O/$1.ncu-rep --page details > $O/$1_details.txt 2>&1
  $NCU -i $O/$1.ncu-rep --page source --csv --print-source sass > $O/$1_sass.csv 2>&1
  grep -E "^  [a-z_0-9]+ |Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|DRAM Throughput|Compute \(SM\) Th|Theoretical Occ|Block Limit|Dynamic Shared|Executed Ipc A" \
    $O/$1_details.txt | head -24
}
run m1_kf k_first 64 4
run m1_vf v_first 64 4
run d3_kf k_first 256 1
run d2_kf k_first 64 1
run d2_vf v_first 64 1
el done
rm -f $O/*.ncu-rep.bak
tar czf $OUT/call1.tgz -C /tmp o
