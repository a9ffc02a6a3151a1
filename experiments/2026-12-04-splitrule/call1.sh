#!/usr/bin/env bash
# Device call 1 (H200): forced splits against unsplit and the library's choice on a grid of few-chain shapes
# (grid.py), the routed kimi_linear_chunk vendored from HEAD (e8e3277), softplus gate.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/chunk.tar.xz -C /tmp || exit 3
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $O/gpu.txt
timeout 540 python3 experiments/2026-12-04-splitrule/grid.py /tmp/vchunk/kimi_linear_chunk/sm_90a/manifest.json \
  $O/grid.json ${SHAPES:-} > $O/grid.log 2>&1; echo "rc $?"; cut -c1-300 $O/grid.log
cp -r $O/. $OUT/
