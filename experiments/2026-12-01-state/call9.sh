#!/usr/bin/env bash
# Device call 9 (H200): the build re-tuned in call 8 (the 65536 bucket's few-chain class routed to the single-stage
# wgmma pass, run beside the prep). Chunk GPU tests (fp64 reference; overlap and its graph replay); call 4's build /
# this one alternating on P1-P6 (the routing change alone); then the README's prefill table: FLA 0.6.0 and cuDNN-FE
# 1.32 in the same process, both gates, cuDNN's K3 shapes, roofline chart.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
OLD=build/_vend3/kimi_linear_chunk/kimi_linear_chunk/sm_90a; LIB=build/_vend7/kimi_linear_chunk/kimi_linear_chunk/sm_90a
el "FLA warm-up in the background"
timeout 330 python3 -m kda2.bench.fla_warm --only bench > $O/fla_warm.log 2>&1 & W=$!
el "GPU tests kimi_linear_chunk"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py \
  tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library $LIB --fla-cases=none -rs -p no:cacheprovider \
  > $O/gpu_kimi_linear_chunk.log 2>&1
echo "rc $?"; tail -1 $O/gpu_kimi_linear_chunk.log
for round in 1 2; do
  for v in old new; do
    L=$OLD; [ $v = new ] && L=$LIB
    timeout 150 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes p --gates softplus,lower_bound \
      --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "bench $v $round rc $?"
  done
done
python3 experiments/2026-12-01-prep3/ab.py $O old new | tee $O/ab.txt
timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "probe rc $?"
wait $W; echo "warm rc $?"; tail -1 $O/fla_warm.log
el "bench P, FLA + cuDNN"
timeout 150 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus,lower_bound --out $O/p > $O/bench_p.log 2>&1
echo "p rc $?"; grep -E "^\| P" $O/p/bench_chunk.md
el "bench K3, cuDNN"
timeout 90 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes k3 --gates lower_bound --out $O/k3 > $O/bench_k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10
python3 -m kda2.bench.report --roofline $O/p/bench_chunk.json $O/roofline_p.png > $O/roofline_p.txt 2>&1
el done
rm -f $O/b_*/*.png
tar czf $OUT/call9.tgz -C /tmp o
