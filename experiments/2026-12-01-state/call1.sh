#!/usr/bin/env bash
# Device call 1 (H200): the overlapped launch under CUDA-graph replay (new test) and the existing overlap tests on the
# K = 128 chunk library; then where the state pass spends its time: ncu (full set, SASS source with warp-stall
# samples) of the routed state kernel on P5 and P2 (softplus), and of the prep on P3 for reference.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton
LIB=build/_vend1/kimi_linear_chunk/kimi_linear_chunk/sm_90a
el "overlap GPU tests (graph replay included)"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_overlap_gpu.py -q -s --require-gpu --chunk-library $LIB \
  --fla-cases=none -rs -p no:cacheprovider > $O/gpu_overlap.log 2>&1
echo "rc $?"; grep -E "graph replays|passed|failed|Error" $O/gpu_overlap.log | tail -40
NCU=$(command -v ncu)
for sh in P5 P2; do
  el "ncu state $sh"
  timeout 150 $NCU --kernel-name regex:kda2_chunk_state --launch-skip 1 --launch-count 1 --set full --import-source yes \
    -o $O/state_$sh python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes $sh --gates softplus \
    --iters 2 --warmup 1 --out $O/b_$sh > $O/ncu_state_$sh.log 2>&1
  echo "rc $?"; tail -2 $O/ncu_state_$sh.log
  $NCU -i $O/state_$sh.ncu-rep --page details > $O/state_${sh}_details.txt 2>&1
  $NCU -i $O/state_$sh.ncu-rep --page source --csv --print-source sass > $O/state_${sh}_sass.csv 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|Warp Cycles Per Issued|Block Size|Grid Size|Dynamic Shared" \
    $O/state_${sh}_details.txt | head -14
done
el "ncu prep P3"
timeout 150 $NCU --kernel-name regex:kda2_chunk_prep --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $O/prep_P3 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P3 --gates softplus \
  --iters 2 --warmup 1 --out $O/b_P3 > $O/ncu_prep_P3.log 2>&1
echo "rc $?"
$NCU -i $O/prep_P3.ncu-rep --page details > $O/prep_P3_details.txt 2>&1
$NCU -i $O/prep_P3.ncu-rep --page source --csv --print-source sass > $O/prep_P3_sass.csv 2>&1
el done
cp $O/gpu_overlap.log $OUT/
tar czf $OUT/call1.tgz -C /tmp o --exclude='*.ncu-rep'
ls -la $OUT
