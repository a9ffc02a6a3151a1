#!/usr/bin/env bash
# Device call 3 (H200): call 2's tune step again with the bundle's path right: kda2 tune of the spec planned with
# max_candidates 14 (build/_ab/vX.tar.xz, plan cache build/_ab/plan-cache-x.json), record to $O.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/vX.tar.xz -C /tmp/ab || exit 3
EXP=/tmp/ab/_vX/kimi_linear_recurrent/sm_90a
mkdir -p /tmp/ab/_vX/.kda2 && cp build/_ab/plan-cache-x.json /tmp/ab/_vX/.kda2/plan-cache.json
timeout 400 python3 -m kda2.tools.cli tune $EXP --tuning /tmp/tun --record $O/tune_x.json --margin 0.2 --time-limit 380 --force \
  > $O/tune_x.log 2>&1; echo "tune rc $?"; tail -25 $O/tune_x.log
tar czf $OUT/call3.tgz -C /tmp o
