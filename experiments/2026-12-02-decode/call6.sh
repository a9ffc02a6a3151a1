#!/usr/bin/env bash
# Device call 6 (H200): the GPU tests on the default (routed) builds of the two Kimi specs (build/_vR: 12 recurrent
# and 6 chunk variants, what the dispatch routes to), as a user of `scons` without CANDIDATES=all runs them.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
el "recurrent GPU tests (routed build)"
KDA2_LIBRARY=build/_vR/kimi_linear_recurrent timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR|^SKIPPED" $O/gpu_recurrent.log | head -12
el "chunk GPU tests (routed build)"
timeout 300 python3 -m pytest -m gpu tests/gpu/ -k "chunk" -q --require-gpu --chunk-library build/_vR/kimi_linear_chunk \
  --fla-cases=none -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1
echo "rc $?"; tail -1 $O/gpu_chunk.log; grep -E "^FAILED|^ERROR|^SKIPPED" $O/gpu_chunk.log | head -12
el done
tar czf $OUT/call6.tgz -C /tmp o
