#!/usr/bin/env bash
# Device call 4 (H200): kda2 tune of the Kimi recurrent spec with k_map = all 8-column latency tiles at T = 1
# (build/_ab/vD.tar.xz, plan cache build/_ab/plan-cache-d.json); the record to $O (committed as tuning/).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/vD.tar.xz -C /tmp/ab || exit 3
LIB=/tmp/ab/_vD/kimi_linear_recurrent/sm_90a
mkdir -p /tmp/ab/_vD/.kda2 && cp build/_ab/plan-cache-d.json /tmp/ab/_vD/.kda2/plan-cache.json
timeout 400 python3 -m kda2.tools.cli tune $LIB --tuning /tmp/tun --record $O/kimi_linear_recurrent.h200.json --margin 0.2 \
  --time-limit 380 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first" $O/tune.log
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
tar czf $OUT/call4.tgz -C /tmp o
