#!/usr/bin/env bash
# Device call 10 (H200): compute-sanitizer memcheck and racecheck over the small cases of the kimi recurrent library
# with the prepared tokens and programmatic dependent launches (tests/gpu/test_recurrent_gpu.py::test_compute_sanitizer).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
KDA2_LIBRARY=build/_vend/rec_new/kimi_linear_recurrent/sm_90a timeout 500 python3 -m pytest -m gpu \
  tests/gpu/test_recurrent_gpu.py -k compute_sanitizer -q --require-gpu -rs -p no:cacheprovider > $O/sanitizer.log 2>&1
echo "sanitizer rc $?"; tail -3 $O/sanitizer.log; grep -E "^FAILED|ERROR SUMMARY|RACECHECK SUMMARY" $O/sanitizer.log | head
tar czf $OUT/call10.tgz -C /tmp o
