#!/usr/bin/env bash
# Device call 6 (H200): does the overlap's default (fitted at K = 128) hold at K = 64 and 256? sweep.py with the small-
# and large-head libraries as committed, on shapes whose state CTAs fall in and around its tiers.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/heads.tar.xz -C /tmp || exit 3
el k64; timeout 100 python3 experiments/2026-12-04-overlap/sweep.py /tmp/vheads/small_head_chunk/sm_90a/manifest.json \
  $O/sweep64.json B1T2048H16 B1T4096H16 B1T2048H24 B1T4096H24 B1T2048H32 B1T3072H32 B1T4096H32 B1T6144H32 B2T2048H16 \
  > $O/sweep64.log 2>&1; echo "rc $?"; cut -c1-170 $O/sweep64.log
el k256; timeout 100 python3 experiments/2026-12-04-overlap/sweep.py /tmp/vheads/large_head_chunk/sm_90a/manifest.json \
  $O/sweep256.json B1T2048H6 B1T4096H6 B1T2048H8 B1T3072H8 B1T4096H8 B1T6144H8 B1T4096H12 B1T2048H16 B1T4096H16 \
  > $O/sweep256.log 2>&1; echo "rc $?"; cut -c1-170 $O/sweep256.log
el done
tar czf $OUT/call6.tgz -C /tmp o
