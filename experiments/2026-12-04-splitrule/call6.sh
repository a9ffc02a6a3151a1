#!/usr/bin/env bash
# Device call 6 (H200): the overlap pathology of call 3 — 1) overlap.py on a finer grid around B1 T10240 H24 and
# B1 T12288 H28 (the routed kimi_linear_chunk of call 5); 2) CUPTI per-kernel times (experiments/2026-12-04-kernels/
# kernels.py, the library's own choice: overlapped) of the two and of neighbours that overlap well.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/libs.tar.xz -C /tmp || exit 3
NEW=/tmp/vnew/kimi_linear_chunk/sm_90a
S=""; for t in 9728 10240 10752 11264 11776 12288; do for h in 22 23 24 25 26 27 28 29 30; do S="$S B1T${t}H$h"; done; done
el scan; timeout 200 python3 experiments/2026-12-04-splitrule/overlap.py $NEW/manifest.json $O/scan.json $S > $O/scan.log 2>&1
echo "rc $?"; cut -c1-150 $O/scan.log
el kernels; timeout 100 python3 experiments/2026-12-04-kernels/kernels.py $NEW/manifest.json $O/kernels.json \
  B1T10240H24:softplus B1T10240H22:softplus B1T12288H28:softplus B1T12288H26:softplus > $O/kernels.log 2>&1
echo "rc $?"; cut -c1-300 $O/kernels.log
el done
cp -r $O/. $OUT/
