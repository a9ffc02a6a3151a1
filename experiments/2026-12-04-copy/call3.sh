#!/usr/bin/env bash
# Device call (H200): ceiling.py, cache-hint variants on decode-shaped tiles, D2 and D3 bytes, three rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=$OUT/copy3; mkdir -p $O
for r in 1 2 3; do python3 experiments/2026-12-04-copy/ceiling.py build/_ab/copy/libcopy.so $O/hints$r.json 2 hints 2>&1 | tee $O/hints$r.log; done
# and groups.py again with its slices bound per group (call 1 of 2026-12-04-groups gave every group the last slice)
timeout 120 python3 experiments/2026-12-04-groups/groups.py build/_ab/v_head/kimi_linear_chunk --shapes P3,P4 \
  --groups 1,2,4 --streams 1,2,4 --out $OUT/groups2.json 2>&1 | tee $OUT/groups2.log
