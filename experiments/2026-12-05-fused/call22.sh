#!/usr/bin/env bash
# Device call 22 — prepared, not run (H100 or H200): form r (form_r.patch applied to this machine's copy of the tree)
# under ncu's full set with per-line samples, P3 bounded gate — where its time goes once step 5 is gone (against calls
# 8, 13, 19); read with `ncu_phases.py call22/p3_r_cudasass.csv.gz 32768 <r's fused.cuh>`.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f22; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name --format=csv,noheader
patch -p1 -s < experiments/2026-12-05-fused/form_r.patch || exit 3
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 200 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $F/p3_r python3 experiments/2026-12-05-fused/one_call.py P3 lower_bound 2 > $F/p3_r.log 2>&1
echo "ncu rc $?"
$NCU -i $F/p3_r.ncu-rep --page details > $F/p3_r_details.txt 2>&1
$NCU -i $F/p3_r.ncu-rep --page source --csv --print-source cuda,sass > $F/p3_r_cudasass.csv 2>&1
grep -E "Duration|Issued Warp|Eligible Warps|Mem Busy|Bank Conflicts" $F/p3_r_details.txt | head -8
gzip $F/*.csv; rm -f $F/p3_r.ncu-rep
python3 experiments/2026-12-05-fused/ncu_phases.py $F/p3_r_cudasass.csv.gz 32768 src/kda2/codegen/include/kda2/fused.cuh \
  2>&1 | head -45
mkdir -p $OUT/call22 && cp $F/* $OUT/call22/
