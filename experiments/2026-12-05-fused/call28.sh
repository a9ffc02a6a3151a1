#!/usr/bin/env bash
# Device call 28 (H100 or H200), no carry: call 23 on form g (the tree's since e751604) — ncu's full set with per-line
# samples of the fused kernel on P3, bounded and softplus gates: where g's step goes, and what the softplus gate adds.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
F=/tmp/f28; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
el "ncu P3 g lower_bound"
timeout 200 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $F/p3_g_lower_bound python3 experiments/2026-12-05-fused/one_call.py P3 lower_bound 2 > $F/p3_g_lower_bound.log 2>&1
echo "ncu rc $?"
$NCU -i $F/p3_g_lower_bound.ncu-rep --page details > $F/p3_g_lower_bound_details.txt 2>&1
$NCU -i $F/p3_g_lower_bound.ncu-rep --page source --csv --print-source cuda,sass > $F/p3_g_lower_bound_cudasass.csv 2>&1
grep -E "Duration|Executed Instructions |Issued Warp|Eligible Warps|Mem Busy|Bank Conflicts" $F/p3_g_lower_bound_details.txt | head -8
gzip $F/*.csv; rm -f $F/p3_g_lower_bound.ncu-rep
python3 experiments/2026-12-05-fused/ncu_phases.py $F/p3_g_lower_bound_cudasass.csv.gz 32768 src/kda2/codegen/include/kda2/fused.cuh \
  > $F/p3_g_lower_bound_phases.txt 2>&1; head -45 $F/p3_g_lower_bound_phases.txt
el "ncu P3 g softplus"
timeout 200 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $F/p3_g_softplus python3 experiments/2026-12-05-fused/one_call.py P3 softplus 2 > $F/p3_g_softplus.log 2>&1
echo "ncu rc $?"
$NCU -i $F/p3_g_softplus.ncu-rep --page details > $F/p3_g_softplus_details.txt 2>&1
$NCU -i $F/p3_g_softplus.ncu-rep --page source --csv --print-source cuda,sass > $F/p3_g_softplus_cudasass.csv 2>&1
grep -E "Duration|Executed Instructions |Issued Warp|Eligible Warps|Mem Busy|Bank Conflicts" $F/p3_g_softplus_details.txt | head -8
gzip $F/*.csv; rm -f $F/p3_g_softplus.ncu-rep
python3 experiments/2026-12-05-fused/ncu_phases.py $F/p3_g_softplus_cudasass.csv.gz 32768 src/kda2/codegen/include/kda2/fused.cuh \
  > $F/p3_g_softplus_phases.txt 2>&1; head -45 $F/p3_g_softplus_phases.txt
mkdir -p $OUT/call28 && cp $F/* $OUT/call28/
el done
