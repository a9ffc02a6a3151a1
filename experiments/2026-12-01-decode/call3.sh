#!/usr/bin/env bash
# Device call 3 (H200): kda2 tune of the recurrent library with the bulk-staged decode candidates (call 2's tune
# stopped at once: the vendored bundle lacked the build's plan cache, now copied beside it).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vendR/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 540 python3 -m kda2.tools.cli tune $NEW --tuning $TUN --margin 0.2 --time-limit 500 --force > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first:[18] |wrote|candidates, |rror" $O/tune.log | head -40
el done
tar czf $OUT/call3.tgz -C /tmp o
