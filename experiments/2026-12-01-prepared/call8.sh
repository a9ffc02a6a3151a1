#!/usr/bin/env bash
# Device call 8 (H200): where the decode kernels' warps wait — ncu's per-reason stall ratios (warp cycles per issued
# instruction, by reason) for the M1 (N=64, T=4) kernels the library routes to in each layout and the D1 (N=1)
# k_first kernel, to choose the next step of issue 13 (batched token form vs occupancy vs memory).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
NEW=build/_vend/rec_new/kimi_linear_recurrent/sm_90a
M=""
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle lg_throttle mio_throttle not_selected \
         selected dispatch_stall drain membar no_instruction branch_resolving imc_miss tex_throttle; do
  M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
M="${M#,},smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active"
for job in "M1 v_first" "M1 k_first" "D1 k_first" "D1 v_first"; do
  set -- $job
  echo "== $1 $2"
  timeout 120 ncu --kernel-name regex:kda2_recurrent_ --launch-skip 3 --launch-count 1 --metrics "$M" \
    python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes $1 --layouts $2 --quick --out $O/b_$1_$2 \
    > $O/ncu_$1_$2.txt 2>&1; echo "rc $?"
  grep -E "kda2_recurrent_|stalled|warps_active|issue_active|dram__|duration|registers" $O/ncu_$1_$2.txt \
    | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{$1=$1; print}' | head -24
done
tar czf $OUT/call8.tgz -C /tmp o
