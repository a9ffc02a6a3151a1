#!/usr/bin/env bash
# Device call 7 (H200): the overlap pathology traced — a trace build of kimi_linear_chunk (HEAD aa07b52 + trace.patch,
# vendored) runs B1 T10240 H24 and T12288 H28 (slow overlapped) and T10240 H22, T12288 H26 (fine) (trace.py).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/tr.tar.xz -C /tmp || exit 3
timeout 120 python3 experiments/2026-12-04-splitrule/trace.py /tmp/vtr/kimi_linear_chunk/sm_90a/manifest.json $O/trace.pt \
  > $O/trace.log 2>&1; echo "rc $?"; cat $O/trace.log | cut -c1-700
cp -r $O/. $OUT/
