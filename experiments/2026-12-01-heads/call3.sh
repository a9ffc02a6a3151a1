#!/usr/bin/env bash
# Device call 3 (H200): kda2 tune of the K = V = 64 and 256 chunk specs (every candidate checked against the fp64
# reference and timed per bucket and batch class); the records go to tuning/ and the next local build routes from them.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
TUN=$O/tuning; cp -r tuning $TUN
timeout 400 python3 -m kda2.tools.cli tune build/small_head_chunk/sm_90a build/large_head_chunk/sm_90a \
  --tuning $TUN --margin 0.2 --time-limit 380 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, |Error|spearman" $O/tune.log | head -40
tar czf $OUT/call3.tgz -C /tmp o
