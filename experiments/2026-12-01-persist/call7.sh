#!/usr/bin/env bash
# Device call 7 (H200): kda2 tune of the recurrent library with the one-sequence decode class timed under graph
# replay (tools/tune.py, model.Workload.graph).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 300 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a \
  --tuning $TUN --margin 0.2 --time-limit 280 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, |Error" $O/tune.log | head -60
el done
tar czf $OUT/call7.tgz -C /tmp o
