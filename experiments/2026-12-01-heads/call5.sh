#!/usr/bin/env bash
# Device call 5 (H200): decode D1-D3 and M1 of kimi_linear_recurrent (tuned, kda2 only), each decode row also against a
# copy of its own bytes (the size's ceiling, same timing) beside the 1 GiB copy: is the 93 % of the 1 GiB
# copy reachable at N = 64 (268 MB) at all?
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
for r in 1 2; do
  timeout 200 python3 -m kda2.bench recurrent --no-fla --library build/_carry/kimi_linear_recurrent/sm_90a \
    --shapes D1,D2,D3,M1 --out $O/round$r > $O/round$r.log 2>&1; echo "round $r rc $?"; cat $O/round$r.log | grep -v "^device"
done
tar czf $OUT/call5.tgz -C /tmp o
