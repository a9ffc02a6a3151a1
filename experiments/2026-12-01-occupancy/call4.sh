#!/usr/bin/env bash
# Device call 4 (H200): kda2 tune of kimi_linear_recurrent (preload candidates for multi-token decode) and
# kimi_linear_chunk (the prep changed) after the persistent-decode revert; then the recurrent GPU tests (every
# multi-token candidate by index, preload ones included).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export TRITON_CACHE_DIR=/tmp/triton
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 240 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a build/kimi_linear_chunk/sm_90a \
  --tuning $TUN --margin 0.2 --time-limit 220 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, |Error" $O/tune.log | head -60
el "recurrent GPU tests"
PYTHONPATH=$ROOT/src:/tmp/site timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=kimi -k "not compute_sanitizer" -rs \
  -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent tests rc $?"; tail -2 $O/gpu_recurrent.log
grep -E "^FAILED" $O/gpu_recurrent.log | head
el done
tar czf $OUT/call4.tgz -C /tmp o
