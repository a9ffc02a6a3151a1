#!/usr/bin/env bash
# Device call 3 (H200): the landed build (bar.patch; build/_ab/n_kimi_linear_chunk, vendored sm_90a) against the peers
# in the same process, as stage call 11 did for the README's table: FLA 0.6.0 warmed (P1-P6 softplus, parallel
# processes) while cuDNN-FE 1.32 compiles its kernel; P1-P6 softplus with FLA and cuDNN (cuDNN given the gate
# precomputed in fp32) and the roofline chart; cuDNN's ten Kimi-K3 shapes and P1-P6 on the bounded gate against cuDNN.
# Carry build/_ab (n_kimi_linear_chunk, whl/).
set -u -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_ab/whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake FLA_FLASH_KDA=0
python3 -c "import fla, torch; print('fla', fla.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
snap() { rm -f $O/*/*.png; tar czf $OUT/call3.tgz -C /tmp o; }
LIB=build/_ab/n_kimi_linear_chunk/kimi_linear_chunk
el "FLA warm-up (P1-P6 softplus) and cuDNN compile"
( timeout 240 python3 experiments/2026-12-03-peers/warm_p_new.py "" > $O/fla_warm.log 2>&1; echo "warm rc $?" >> $O/rcs.txt ) &
( timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "cudnn probe rc $?" >> $O/rcs.txt ) &
wait; cat $O/rcs.txt; grep -c " ok" $O/fla_warm.log; grep -i fail $O/fla_warm.log | head -3; snap
el "bench P1-P6 softplus (FLA + cuDNN)"
timeout 110 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus --out $O/psp > $O/bench_psp.log 2>&1
echo "p softplus rc $?"; grep -E "^\| P" $O/psp/bench_chunk.md
python3 -m kda2.bench.report --roofline $O/psp/bench_chunk.json $O/roofline_p.png > $O/roofline_p.txt 2>&1
cp $O/roofline_p.png $OUT/ 2>/dev/null; snap
el "bench K3 (cuDNN, bounded gate)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes k3 --gates lower_bound --out $O/k3 > $O/bench_k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10; snap
el "bench P1-P6 bounded gate (cuDNN)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes p --gates lower_bound --out $O/plb > $O/bench_plb.log 2>&1
echo "p lb rc $?"; grep -E "^\| P" $O/plb/bench_chunk.md
el done; snap
