#!/usr/bin/env bash
# Device call 1 (H200): HEAD a331b1e's small- and large-head libraries, forced splits 1-16 against the library's own
# choice over few-chain grids at K = V = 64 and 256 (grid.py), to fit the split rule per head dim.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/head.tar.xz -C /tmp || exit 3
L=/tmp/vhead; X=experiments/2026-12-04-split64/grid.py
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $O/gpu.txt
G=""; for t in 2048 3072 4096 5120 6144 8192 12288 16384 32768; do for h in 1 2 3 4 6 8 12 16 20 24 32; do
  G="$G B1T${t}H$h"; done; done
G="$G B2T4096H8 B2T8192H4 B4T4096H4 B2T16384H8 B2T4096H16 B4T8192H4"
el grid64; HEAD_DIM=64 timeout 260 python3 $X $L/small_head_chunk/small_head_chunk/sm_90a/manifest.json $O/grid64.json $G \
  > $O/grid64.log 2>&1; echo "rc $?"; tail -2 $O/grid64.log
G=""; for t in 2048 3072 4096 6144 8192 12288 16384 32768; do for h in 1 2 3 4 5 6 8 10 12; do G="$G B1T${t}H$h"; done; done
G="$G B2T4096H4 B2T8192H2 B4T4096H2 B2T16384H4"
el grid256; HEAD_DIM=256 timeout 250 python3 $X $L/large_head_chunk/large_head_chunk/sm_90a/manifest.json $O/grid256.json \
  $G > $O/grid256.log 2>&1; echo "rc $?"; tail -2 $O/grid256.log
el done
tar czf $OUT/call1.tgz -C /tmp o
