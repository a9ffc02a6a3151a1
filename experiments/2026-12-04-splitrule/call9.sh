#!/usr/bin/env bash
# Device call 9 (H200): PREP_LEAD 8 (HEAD aa07b52) / 16 / 24 (the same tree, one constant changed), routed
# kimi_linear_chunk vendored from each, on overlapped shapes: the slow-head ones of calls 3, 6 and 8, many-chain ones
# (the L2 the lead's slots hold), P2 and P5 (leads.py).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/leads.tar.xz -C /tmp || exit 3
timeout 300 python3 experiments/2026-12-04-splitrule/leads.py $O/leads.json lead8=/tmp/vnew/kimi_linear_chunk/sm_90a \
  lead16=/tmp/vl16/kimi_linear_chunk/sm_90a lead24=/tmp/vl24/kimi_linear_chunk/sm_90a > $O/leads.log 2>&1
echo "rc $?"; cut -c1-250 $O/leads.log
cp -r $O/. $OUT/
