#!/usr/bin/env bash
# Device call (H200): ceiling.py with the tile-size, thread-count and L2::256B variants, D2's and D3's bytes, twice.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=$OUT/copy2; mkdir -p $O
for r in 1 2; do python3 experiments/2026-12-04-copy/ceiling.py build/_ab/copy/libcopy.so $O/ceiling$r.json 2 2>&1 | tee $O/ceiling$r.log; done
