#!/usr/bin/env bash
# Device call 23 (H200), no carry: call 22 on the tree (form r is the tree's since 7988dba): ncu's full set with
# per-line samples of the fused kernel, P3 bounded gate — where r's time goes now that step 5 is gone.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
F=/tmp/f23; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
el "ncu P3 r"
timeout 200 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $F/p3_r python3 experiments/2026-12-05-fused/one_call.py P3 lower_bound 2 > $F/p3_r.log 2>&1
echo "ncu rc $?"
$NCU -i $F/p3_r.ncu-rep --page details > $F/p3_r_details.txt 2>&1
$NCU -i $F/p3_r.ncu-rep --page source --csv --print-source cuda,sass > $F/p3_r_cudasass.csv 2>&1
grep -E "Duration|Executed Instructions |Issued Warp|Eligible Warps|Mem Busy|Bank Conflicts" $F/p3_r_details.txt | head -8
gzip $F/*.csv; rm -f $F/p3_r.ncu-rep
python3 experiments/2026-12-05-fused/ncu_phases.py $F/p3_r_cudasass.csv.gz 32768 src/kda2/codegen/include/kda2/fused.cuh \
  > $F/p3_r_phases.txt 2>&1; head -45 $F/p3_r_phases.txt
mkdir -p $OUT/call23 && cp $F/* $OUT/call23/
el done
