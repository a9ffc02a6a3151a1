#!/usr/bin/env bash
# Device call (H200): the session's tuned Kimi chunk build (first-row factors, step 6 unrolled) against cuDNN-FE 1.32's
# fused kernel in the same process, for the closing note's acceptance table: P1-P6 with the bounded gate, then P1-P6
# softplus (cuDNN given the gate precomputed in fp32). No FLA: its Triton warm-up did not fit the session's last
# device minutes. Wheels carried in build/_ab/whl; $O packed into $OUT after every step.
set -u -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  build/_ab/whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake FLA_FLASH_KDA=0
LIB=build/kimi_linear_chunk/sm_90a
snap() { rm -f $O/*/*.png; tar czf $OUT/call4.tgz -C /tmp o; }
python3 -c "import fla, torch; print('fla', fla.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
el "cuDNN compile"
timeout 150 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "cudnn probe rc $?"; tail -1 $O/cudnn_probe.log
el "bench P1-P6 bounded gate (cuDNN)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes p --gates lower_bound --out $O/plb > $O/bench_plb.log 2>&1
echo "p lb rc $?"; grep -E "^\| P" $O/plb/bench_chunk.md; snap
el "bench P1-P6 softplus (cuDNN)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes p --gates softplus --out $O/psp > $O/bench_psp.log 2>&1
echo "p softplus rc $?"; grep -E "^\| P" $O/psp/bench_chunk.md
el done; snap
