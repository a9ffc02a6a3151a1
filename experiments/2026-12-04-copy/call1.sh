#!/usr/bin/env bash
# Device call (H200): ceiling.py (copies of D2's / D3's bytes vs the 1 GiB copy), then the decode benchmark D2, D3, M1
# on HEAD's routed Kimi recurrent build (built here, carried in build/_ab/rec), no FLA, in the same call.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=$OUT/copy; mkdir -p $O
python3 experiments/2026-12-04-copy/ceiling.py build/_ab/copy/libcopy.so $O/ceiling.json 2>&1 | tee $O/ceiling.log
timeout 200 python3 -m kda2.bench recurrent --library build/_ab/rec/kimi_linear_recurrent --shapes D2,D3,M1 --no-fla \
  --out $O/rec 2>&1 | tail -25
python3 experiments/2026-12-04-copy/ceiling.py build/_ab/copy/libcopy.so $O/ceiling2.json 2>&1 | tail -30
