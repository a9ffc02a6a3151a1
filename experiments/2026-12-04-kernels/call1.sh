#!/usr/bin/env bash
# Device call 1 (H200): per-kernel GPU time of the routed chunk library (HEAD) on P1–P6 (softplus) and K1–K10
# (lower_bound), from CUPTI's kernel records (kernels.py); SHAPES (SHAPE:GATE ...) names others.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/chunk.tar.xz -C /tmp || exit 3
timeout 400 python3 experiments/2026-12-04-kernels/kernels.py /tmp/vchunk/kimi_linear_chunk/sm_90a/manifest.json \
  $O/kernels.json ${SHAPES:-} > $O/kernels.log 2>&1; echo "rc $?"; cat $O/kernels.log | cut -c1-400
tar czf $OUT/call1.tgz -C /tmp o
