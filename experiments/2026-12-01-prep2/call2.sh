#!/usr/bin/env bash
# Device call 2 (H200): the prep kernel's per-SASS profile (warp-stall samples, executed instructions, shared
# wavefronts) on P3 with each gate, for the phase analysis (sass_phases.py) that picks this session's prep work.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
LIB=build/_vend2/chunk/kimi_linear_chunk/sm_90a
NCU=$(command -v ncu)
for g in softplus lower_bound; do
  timeout 200 $NCU --kernel-name regex:_prep_ --launch-skip 2 --launch-count 1 --set full --import-source yes \
    -o $O/p3_$g python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P3 \
    --gates $g --iters 2 --warmup 1 --out $O/b_$g > $O/ncu_$g.log 2>&1
  echo "ncu $g rc $?"; tail -2 $O/ncu_$g.log
  $NCU -i $O/p3_$g.ncu-rep --page details > $O/p3_${g}_details.txt 2>&1
  $NCU -i $O/p3_$g.ncu-rep --page source --csv --print-source sass > $O/p3_${g}_sass.csv 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|Memory Throughput|Compute \(SM\)" \
    $O/p3_${g}_details.txt | head -12
done
cp $O/*.txt $O/*.csv $OUT/
