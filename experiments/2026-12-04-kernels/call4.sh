#!/usr/bin/env bash
# Device call 4 (H200): forced splits 1–8 against the library's choice (None) on P6 and K1, K3, K4, K7, K8 with the
# combine on 8 columns (the routed kimi_linear_chunk built from 967199a; splits.py).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/cc2.tar.xz -C /tmp || exit 3
timeout 200 python3 experiments/2026-12-04-kernels/splits.py /tmp/cc2/kimi_linear_chunk/kimi_linear_chunk/sm_90a/manifest.json \
  $O/splits.json > $O/splits.log 2>&1; echo "rc $?"; cat $O/splits.log | cut -c1-300
tar czf $OUT/call4.tgz -C /tmp o
