#!/usr/bin/env bash
# Device call 3 (H200): COMBINE_COLS = 8 as landed — the split GPU tests on the routed K = 64, 128 and 256 chunk
# libraries built from the commit (small_head_chunk, kimi_linear_chunk, large_head_chunk).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/cc2.tar.xz -C /tmp || exit 3     # /tmp/cc2/<spec>
for s in small_head_chunk kimi_linear_chunk large_head_chunk; do
  timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
    --chunk-library=/tmp/cc2/$s/$s/sm_90a -p no:cacheprovider > $O/split_$s.log 2>&1
  echo "split tests $s rc $?: $(tail -1 $O/split_$s.log)"
done
tar czf $OUT/call3.tgz -C /tmp o
