#!/usr/bin/env bash
# Device call 3 (shipping): every GPU test with the final runtime (monitor hooks in), the vendored-bundle test,
# the C++ example; chunk tests against the fp64 reference only (FLA compared in call 2 on the same kernels).
set -u -o pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:/tmp/site TRITON_CACHE_DIR=$PWD/.triton-cache
python3 -m pytest -m gpu tests/gpu -q --require-gpu --results-dir $OUT --fla-cases none -rs -p no:cacheprovider \
  --ignore=tests/gpu/test_fla_backend_gpu.py 2>&1 | tee $OUT/gpu_tests_final.log | tail -25
