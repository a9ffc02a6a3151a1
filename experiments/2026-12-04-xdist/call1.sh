#!/usr/bin/env bash
# Device call (H200): the README's parallel test command on a GPU host — the recurrent GPU tests under pytest-xdist
# (4 workers, --dist loadgroup: conftest puts every gpu test in one group) on HEAD's routed Kimi recurrent build
# (build/_ab/rec); the wheels of pytest-xdist and execnet carried in build/_ab/xd (the device has no index).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
pip install -q --no-deps build/_ab/xd/*.whl 2>&1 | tail -1
KDA2_LIBRARY=build/_ab/rec/kimi_linear_recurrent timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_gpu.py \
  -v -n 4 --dist loadgroup --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $OUT/xdist_gpu.log 2>&1
echo "pytest rc $?"; tail -n 3 $OUT/xdist_gpu.log
echo "workers that ran a test:"; grep -oE "^\[gw[0-9]+\]" $OUT/xdist_gpu.log | sort | uniq -c
