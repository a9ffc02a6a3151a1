#!/usr/bin/env bash
# Device call 3, carry ["build/_ab/vall.tar.xz"]: the two-CTAs-an-SM form of fused16 (Sᵀ's 16-bit copy in shared
# memory as the wgmmas' A, 128 registers; the copies' pieces fixed per thread): the fp64 GPU tests (36 cases, the
# composed exact split), its time against the routed Kimi chunk library (P and K3 shapes, same process, alternating;
# the split where chains are few), and ncu of one P3 call.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
F=/tmp/f3; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp || exit 3
el "fused GPU tests"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider --maxfail=4 \
  > $F/test_fused.log 2>&1; echo "fused tests rc $?"
grep -E "^fused16" $F/test_fused.log | sed 's/^fused16 //' | sort -t' ' -k5 -g | tail -3; tail -2 $F/test_fused.log
grep -E "^E  |Error" $F/test_fused.log | head -12
el "fused timing"
timeout 200 python3 experiments/2026-12-05-fused/time_fused.py /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json \
  P1 P2 P3 P4 P5 P6 K1 K2 K3 K4 K5 K6 K7 K8 K9 K10 > $F/time_fused.log 2>&1; echo "timing rc $?"; tail -30 $F/time_fused.log
el "ncu"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 100 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $F/p3 python3 experiments/2026-12-05-fused/one_call.py P3 softplus 2 > $F/p3.log 2>&1
echo "ncu rc $?"
$NCU -i $F/p3.ncu-rep --page details > $F/p3_details.txt 2>&1
$NCU -i $F/p3.ncu-rep --page source --csv --print-source cuda,sass > $F/p3_cudasass.csv 2>&1
$NCU -i $F/p3.ncu-rep --page source --csv --print-source sass > $F/p3_sass.csv 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|Block Limit" $F/p3_details.txt | head -12
python3 experiments/2026-12-02-ring/sass_agg.py $F/p3_sass.csv 0 | head -14
gzip $F/*.csv; rm -f $F/p3.ncu-rep
cp -r $F $OUT/call3
el done
