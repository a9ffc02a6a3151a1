#!/usr/bin/env bash
# Device call 6 (H200): alloc.py on HEAD's routed Kimi recurrent build (build/_ab/rec): the benchmark's equal-size copy
# alone, inside bench_shape, and after it; then ceiling.py "same" at D2's bytes for the standalone figure.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=$OUT/copy6; mkdir -p $O
python3 experiments/2026-12-04-copy/alloc.py build/_ab/rec/kimi_linear_recurrent $O/alloc.json 2>&1 | tee $O/alloc.log
python3 experiments/2026-12-04-copy/ceiling.py build/_ab/copy/libcopy.so $O/same.json 1 same 2>&1 | tee $O/same.log
