#!/usr/bin/env bash
# Device call 7 (H200): the tiers in chains, as committed: sweep.py on the K = 64 rows call 6 found overlapped by the
# CTA form, and the K = 128 shapes at the tiers' edges.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/chain.tar.xz -C /tmp || exit 3
timeout 60 python3 experiments/2026-12-04-overlap/sweep.py /tmp/vchain/small_head_chunk/sm_90a/manifest.json \
  $O/sweep64.json B1T2048H16 B1T4096H16 > $O/sweep64.log 2>&1; echo "rc $?"; cut -c1-170 $O/sweep64.log
timeout 90 python3 experiments/2026-12-04-overlap/sweep.py /tmp/vchain/kimi_linear_chunk/sm_90a/manifest.json \
  $O/sweep128.json B1T4096H22 B1T3072H24 B1T4096H24 B1T2048H26 B1T4096H26 B1T2048H27 B1T2048H32 B1T3072H32 \
  > $O/sweep128.log 2>&1; echo "rc $?"; cut -c1-170 $O/sweep128.log
tar czf $OUT/call7.tgz -C /tmp o
