#!/usr/bin/env bash
# Device call 1 (H200): where the chunk forward's time goes today, per kernel (prep / state / fold / combine) on
# P1-P6 and K7 with both gates (ncu gpu__time_duration, one call each), and the prep's stall ratios on P3 with
# each gate — to choose this session's prep work (issue 12).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
LIB=build/_vend2/chunk/kimi_linear_chunk/sm_90a
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
el "per-kernel durations"
timeout 240 ncu --kernel-name regex:kda2_chunk --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread \
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P1,P2,P3,P4,P5,P6,K7 --gates softplus,lower_bound \
  --iters 1 --warmup 0 --out $O/dur > $O/ncu_dur.txt 2>&1; echo "rc $?"
python3 - $O/ncu_dur.txt <<'PY'
import re,sys
cur=None
for line in open(sys.argv[1]):
    m=re.match(r'\s+(kda2_chunk_\w+)',line)
    if m: cur=m.group(1); continue
    m=re.search(r'(gpu__time_duration.sum|launch__grid_size|launch__registers_per_thread)\s+\S+\s+([\d,.]+)',line)
    if m and cur: print(cur, m.group(1).split('__')[1], m.group(2))
PY
M=""
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle not_selected selected dispatch_stall lg_throttle; do
  M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
M="${M#,},smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,launch__registers_per_thread,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum"
for g in softplus lower_bound; do
  el "prep stalls P3 $g"
  timeout 150 ncu --kernel-name regex:kda2_chunk_prep --launch-count 1 --metrics "$M" \
    python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P3 --gates $g --iters 1 --warmup 0 --out $O/st_$g \
    > $O/ncu_prep_P3_$g.txt 2>&1; echo "rc $?"
  grep -E "stalled|warps_active|issue_active|dram__|duration|registers|hmma|bank|inst_executed" $O/ncu_prep_P3_$g.txt \
    | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{$1=$1; print}'
done
el done
cp $O/*.txt $OUT/
