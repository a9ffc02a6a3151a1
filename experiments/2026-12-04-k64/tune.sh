#!/usr/bin/env bash
# Device call 1b (H200): call1.sh's tune step alone — call 1's all64.tar.xz lacked build/_all64/.kda2 (the plan cache
# `kda2 tune` reads beside a runtime-only device install), so tune stopped at its first line.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/all64.tar.xz || exit 3
A=build/_all64/small_head_chunk/sm_90a
rm -rf /tmp/tun && cp -r tuning /tmp/tun
timeout 560 python3 -m kda2.tools.cli tune $A --tuning /tmp/tun --record $O/small_head_chunk.h200.json --margin 0.2 \
  --time-limit 500 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first:" $O/tune.log | head -20
tail -5 $O/tune.log
tar czf $OUT/tune.tgz -C /tmp o
