#!/usr/bin/env bash
# Device call 10 (H200): PREP_LEAD 8 / 16 / 24 / 32, three rounds on P5 and P2 (call 9's P5 at 24 had one slow
# round) and on two slow-head shapes; P1, P3 and K6 (plain launches: the lead must not matter) as a control.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/leads.tar.xz -C /tmp || exit 3
ROUNDS=3 timeout 400 python3 experiments/2026-12-04-splitrule/leads.py $O/leads.json lead8=/tmp/vnew/kimi_linear_chunk/sm_90a \
  lead16=/tmp/vl16/kimi_linear_chunk/sm_90a lead24=/tmp/vl24/kimi_linear_chunk/sm_90a \
  lead32=/tmp/vl32/kimi_linear_chunk/sm_90a -- P5 P2 B1T10240H24 B1T11264H22 P1 P3 K6 > $O/leads.log 2>&1
echo "rc $?"; cut -c1-300 $O/leads.log
cp -r $O/. $OUT/
