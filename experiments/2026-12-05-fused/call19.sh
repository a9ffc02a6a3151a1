#!/usr/bin/env bash
# Device call 19 (H100): form w1 (form_w1.patch applied to this machine's copy of the tree) under ncu's full set with
# per-line samples, P3 bounded gate — where its shared-memory waits sit, for the next form; read with
# `ncu_phases.py call19/p3_w1_cudasass.csv.gz 32768 <w1's fused.cuh>`.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f19; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name --format=csv,noheader
patch -p1 -s < experiments/2026-12-05-fused/form_w1.patch || exit 3
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 200 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $F/p3_w1 python3 experiments/2026-12-05-fused/one_call.py P3 lower_bound 2 > $F/p3_w1.log 2>&1
echo "ncu rc $?"
$NCU -i $F/p3_w1.ncu-rep --page details > $F/p3_w1_details.txt 2>&1
$NCU -i $F/p3_w1.ncu-rep --page source --csv --print-source cuda,sass > $F/p3_w1_cudasass.csv 2>&1
grep -E "Duration|Issued Warp|Eligible Warps|Mem Busy|Bank Conflicts" $F/p3_w1_details.txt | head -8
gzip $F/*.csv; rm -f $F/p3_w1.ncu-rep
python3 experiments/2026-12-05-fused/ncu_phases.py $F/p3_w1_cudasass.csv.gz 32768 src/kda2/codegen/include/kda2/fused.cuh \
  2>&1 | head -45
mkdir -p $OUT/call19 && cp $F/* $OUT/call19/
