#!/usr/bin/env bash
# Device call 2: ncu (full set, per-line samples; the kernel built with -lineinfo) of one fused16 call on P3, softplus,
# producer / consumer in turns: where the 4.4 µs of a 16-token step go (call 1: 1.10 ms on the H100).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f2; rm -rf $F; mkdir -p $F
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 240 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $F/p3 python3 experiments/2026-12-05-fused/one_call.py P3 softplus 0 2 > $F/p3.log 2>&1
echo "ncu rc $?"; tail -2 $F/p3.log
$NCU -i $F/p3.ncu-rep --page details > $F/p3_details.txt 2>&1
$NCU -i $F/p3.ncu-rep --page source --csv --print-source sass > $F/p3_sass.csv 2>&1
$NCU -i $F/p3.ncu-rep --page source --csv --print-source cuda,sass > $F/p3_cudasass.csv 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|DRAM Throughput|Executed Ipc A" $F/p3_details.txt | head -12
python3 experiments/2026-12-02-ring/sass_agg.py $F/p3_sass.csv 25 | head -60
gzip $F/*.csv
rm -f $F/p3.ncu-rep
cp -r $F $OUT/prof
