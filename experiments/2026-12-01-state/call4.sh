#!/usr/bin/env bash
# Device call 4 (H200): the re-tuned build (call 3's record; the state pass of call 2). Chunk GPU tests (fp64
# reference; overlap and its graph replay); per-kernel split on P1-P6 (ncu, during the FLA warm-up) and the new
# state pass's stall profile on P5; then the README's prefill table: FLA 0.6.0 and cuDNN-FE 1.32 in the same
# process, both gates, cuDNN's K3 shapes, roofline chart.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
LIB=build/_vend3/kimi_linear_chunk/kimi_linear_chunk/sm_90a
el "FLA warm-up in the background"
timeout 330 python3 -m kda2.bench.fla_warm --only bench > $O/fla_warm.log 2>&1 & W=$!
el "GPU tests kimi_linear_chunk"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py \
  tests/gpu/test_chunk_overlap_gpu.py -q -s --require-gpu --chunk-library $LIB --fla-cases=none -rs -p no:cacheprovider \
  > $O/gpu_kimi_linear_chunk.log 2>&1
echo "rc $?"; tail -1 $O/gpu_kimi_linear_chunk.log
timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "probe rc $?"
el "ncu split"
timeout 200 ncu --kernel-name regex:kda2_chunk --metrics gpu__time_duration.sum,launch__grid_size \
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
  --iters 1 --warmup 0 --out $O/dur > $O/ncu_dur.txt 2>&1; echo "ncu rc $?"
el "ncu state P5"
timeout 120 ncu --kernel-name regex:kda2_chunk_state --launch-skip 1 --launch-count 1 --set full -o $O/state_P5 \
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P5 --gates softplus --iters 2 --warmup 1 \
  --out $O/b_P5 > $O/ncu_state_P5.log 2>&1; echo "rc $?"
ncu -i $O/state_P5.ncu-rep --page details > $O/state_P5_details.txt 2>&1
ncu -i $O/state_P5.ncu-rep --page source --csv --print-source sass > $O/state_P5_sass.csv 2>&1
python3 experiments/2026-12-01-state/sass_stalls.py $O/state_P5_sass.csv 200 > $O/state_P5_stalls.txt; head -14 $O/state_P5_stalls.txt
rm -f $O/state_P5.ncu-rep $O/state_P5_sass.csv
wait $W; echo "warm rc $?"; tail -1 $O/fla_warm.log
el "bench P, FLA + cuDNN"
timeout 150 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus,lower_bound --out $O/p > $O/bench_p.log 2>&1
echo "p rc $?"; grep -E "^\| P" $O/p/bench_chunk.md
el "bench K3, cuDNN"
timeout 90 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes k3 --gates lower_bound --out $O/k3 > $O/bench_k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10
python3 -m kda2.bench.report --roofline $O/p/bench_chunk.json $O/roofline_p.png > $O/roofline_p.txt 2>&1
el done
tar czf $OUT/call4.tgz -C /tmp o
