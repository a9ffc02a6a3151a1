#!/usr/bin/env bash
# Device call (H200): experiments/2026-12-03-splitknob/call6.sh (the first-row factors patch's GPU tests at K = 64 /
# 256), then one prep launch of P1 (softplus) on the patched kimi_linear_chunk under ncu --set full with source
# counters: the pipe utilisation and per-phase budget of today's prep (which pipe bounds it: ALU, FMA, XU, LSU).
set -u -o pipefail
bash experiments/2026-12-03-splitknob/call6.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
LIB=build/kimi_linear_chunk/sm_90a
timeout 240 ncu --kernel-name regex:kda2_chunk_prep --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $O/prep_P1 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P1 --gates softplus \
  --iters 2 --warmup 1 --out $O/b_P1 > $O/ncu_prep_P1.log 2>&1
echo "ncu rc $?"; tail -2 $O/ncu_prep_P1.log
ncu -i $O/prep_P1.ncu-rep --page details > $O/prep_P1_details.txt 2>&1
ncu -i $O/prep_P1.ncu-rep --page raw --csv > $O/prep_P1_raw.csv 2>&1
ncu -i $O/prep_P1.ncu-rep --page source --csv --print-source sass > $O/prep_P1_sass.csv 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|Executed Ipc A|highest-utilized" $O/prep_P1_details.txt | head -12
rm -f $O/prep_P1.ncu-rep; gzip $O/prep_P1_sass.csv $O/prep_P1_raw.csv
python3 experiments/2026-12-03-pipes/blocks.py $O/prep_P1_sass.csv.gz 8192 0.006 | tee $O/blocks.out
tar czf $OUT/pipes1.tgz -C /tmp o
