#!/usr/bin/env bash
# Device call 7 (H200): call 6 again with FLA installed (its chunk tests import it) and the routed chunk build
# keeping, per layout, the first variant that runs the exact split (call 6: the split tests failed with
# KDA2_ERR_FEATURE, the routed build having no variant with a fold): recurrent and chunk GPU tests on build/_vR.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton
el "recurrent GPU tests (routed build)"
KDA2_LIBRARY=build/_vR/kimi_linear_recurrent timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR|^SKIPPED" $O/gpu_recurrent.log | head -12
el "chunk GPU tests (routed build)"
timeout 330 python3 -m pytest -m gpu tests/gpu/ -k "chunk" -q --require-gpu --chunk-library build/_vR/kimi_linear_chunk \
  --fla-cases=none -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1
echo "rc $?"; tail -1 $O/gpu_chunk.log; grep -E "^FAILED|^ERROR|^SKIPPED" $O/gpu_chunk.log | head -12
el done
tar czf $OUT/call7.tgz -C /tmp o
