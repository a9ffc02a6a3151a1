#!/usr/bin/env bash
# Device call 5 (H200): ceiling.py "same": the benchmark's equal-size copy (torch copy_, one source / destination pair)
# against rotated pairs and cudaMemcpyAsync, D2's and D3's bytes, two runs.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=$OUT/copy5; mkdir -p $O
for r in 1 2; do python3 experiments/2026-12-04-copy/ceiling.py build/_ab/copy/libcopy.so $O/same$r.json 2 same 2>&1 | tee $O/same$r.log; done
