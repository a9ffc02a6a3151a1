#!/usr/bin/env bash
# Device call 1 (issue 12, exact split): the split GPU tests and the chunk GPU tests without FLA (5e-3 bar
# only), then same-run timings of split 1/2/4/8/16/auto on P1–P6.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
nvidia-smi -L
export PYTHONPATH=$ROOT/src
python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_gpu.py -q -x -rs -p no:cacheprovider \
  --chunk-library build/kimi_linear_chunk 2>&1 | tee $OUT/gpu_tests.log | tail -25
python3 experiments/2026-11-30-split/time_split.py build/kimi_linear_chunk $OUT/split_timing.json 2>&1 | tee $OUT/split_timing.log
