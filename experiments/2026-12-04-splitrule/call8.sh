#!/usr/bin/env bash
# Device call 8 (H200): trace2.py, the trace build on the benchmark's own inputs (call 7's tuned-style
# inputs did not show the pathology).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/tr.tar.xz -C /tmp || exit 3
timeout 120 python3 experiments/2026-12-04-splitrule/trace2.py /tmp/vtr/kimi_linear_chunk/sm_90a/manifest.json $O/trace2.pt \
  > $O/trace2.log 2>&1; echo "rc $?"; cat $O/trace2.log | cut -c1-200
cp -r $O/. $OUT/
