#!/usr/bin/env bash
# Device call 10 (H200): the chunk GPU tests (fp64 reference, split included) and the overlap test on the final
# overlap build (the overlapped state pass as its own instantiation) for all three chunk specs.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  timeout 140 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py \
    -q --require-gpu --chunk-library build/_vendH/$s/$s/sm_90a --fla-cases=none -rs -p no:cacheprovider > $O/gpu_$s.log 2>&1
  echo "$s rc $?"; tail -1 $O/gpu_$s.log
  tar czf $OUT/call10.tgz -C /tmp o
done
