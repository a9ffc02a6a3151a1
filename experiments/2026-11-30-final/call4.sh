#!/usr/bin/env bash
# Device call 4 (H200): calibrate; tune again with the committed records as incumbents (--margin 0.2 records the
# candidates that lose by more than 20 % as failures, the evidence for rules); same-run tuned vs untuned
# (build_untuned: the same specs built without tuning records); the decode benchmark (issue 13); the chunk
# benchmark against FLA 0.6 and cuDNN-FE (P1-P6) and against cuDNN-FE (k3); the roofline chart.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl .whl/nvidia_cudnn_frontend-*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m kda2.bench.fla_warm --only bench > $O/fla_warm.log 2>&1 &
W=$!
cli() { python3 -m kda2.tools.cli "$@"; }
el calibrate; timeout 120 python3 -m kda2.tools.cli calibrate --out $O/h200-measured.yaml > $O/calibrate.log 2>&1; echo "rc $?"
cat $O/h200-measured.yaml
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 200 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a build/small_head_recurrent/sm_90a \
  build/kimi_linear_chunk/sm_90a --tuning $TUN --margin 0.2 --time-limit 170 > $O/tune.log 2>&1; echo "rc $?"
grep -c slower_than_incumbent $TUN/failures/*.jsonl
el "tuned vs untuned"
for lib in untuned tuned; do
  d=build; [ $lib = untuned ] && d=build_untuned
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $d/kimi_linear_chunk --shapes p --gates softplus \
    --out $O/chunk_$lib > $O/chunk_$lib.log 2>&1; echo "chunk $lib rc $?"
  python3 -m kda2.bench recurrent --no-fla --library $d/kimi_linear_recurrent --shapes D2 --out $O/dec_$lib \
    > $O/dec_$lib.log 2>&1; echo "decode $lib rc $?"
done
el "decode benchmark"
python3 -m kda2.bench recurrent --no-fla --library build/kimi_linear_recurrent --shapes D1,D2,D3,M1,D2h,D3h \
  --out $O/decode > $O/decode.log 2>&1; echo "rc $?"
el "wait FLA warm-up"; wait $W; tail -2 $O/fla_warm.log
el "chunk bench P1-P6 vs FLA + cuDNN"
timeout 240 python3 -m kda2.bench chunk --library build/kimi_linear_chunk --shapes p --gates softplus,lower_bound \
  --out $O/p > $O/bench_p.log 2>&1; echo "rc $?"
el "chunk bench k3 vs cuDNN"
timeout 90 python3 -m kda2.bench chunk --no-fla --library build/kimi_linear_chunk --shapes k3 --gates lower_bound \
  --out $O/k3 > $O/bench_k3.log 2>&1; echo "rc $?"
python3 -m kda2.bench.report --roofline $O/p/bench_chunk.json $O/roofline_p.png > $O/roofline.txt 2>&1
el done
cp $O/roofline_p.png $OUT/ 2>/dev/null; cp $O/p/bench_chunk.md $OUT/bench_p.md 2>/dev/null
tar czf $OUT/call4.tgz -C /tmp o; ls -la $OUT
