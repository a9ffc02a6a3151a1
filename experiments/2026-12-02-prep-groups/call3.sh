#!/usr/bin/env bash
# Device call 3 (H200): the chunk GPU tests (fp64 bar; FLA installed from the carried wheels but not run: --fla-cases
# none) on the final routed Kimi chunk library (vCN: both prep changes).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
tar xJf build/_ab/vCN.tar.xz -C /tmp/ab || exit 3
timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py \
  -q --require-gpu --fla-cases none --chunk-library /tmp/ab/_vCN/kimi_linear_chunk -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_chunk.log; grep -E "^FAILED|^ERROR" $O/gpu_chunk.log | head -6
tar czf $OUT/call3.tgz -C /tmp o
