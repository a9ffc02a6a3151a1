#!/usr/bin/env bash
# Device call (H200): one prep launch of P1 (softplus) under ncu --set full with source counters, for the per-phase
# instruction and stall budget of today's prep (sass_phases.py; issue 12: what a several-fold cheaper prep must cut).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/vC.tar.xz -C /tmp/ab || exit 3
LIB=/tmp/ab/_vC/kimi_linear_chunk
timeout 200 ncu --kernel-name regex:kda2_chunk_prep --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $O/prep_P1 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P1 --gates softplus \
  --iters 2 --warmup 1 --out $O/b_P1 > $O/ncu_prep_P1.log 2>&1
echo "ncu rc $?"; tail -2 $O/ncu_prep_P1.log
ncu -i $O/prep_P1.ncu-rep --page details > $O/prep_P1_details.txt 2>&1
ncu -i $O/prep_P1.ncu-rep --page source --csv --print-source sass > $O/prep_P1_sass.csv 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|Executed Ipc A|Grid Size" $O/prep_P1_details.txt | head -10
ls -la $O; rm -f $O/prep_P1.ncu-rep; gzip $O/prep_P1_sass.csv
tar czf $OUT/call2.tgz -C /tmp o
