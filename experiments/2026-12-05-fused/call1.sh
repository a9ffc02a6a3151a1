#!/usr/bin/env bash
# Device call 1 (H200 or H100), carry ["build/_ab/vall.tar.xz", "build/_ab/cand.tar.xz", "build/_ab/rec_head.tar.xz"]:
# 1) the fused 16-token kernel (kda2/fused.cuh) against the fp64 reference on the chunk GPU tests' 36 cases;
# 2) its time against the routed Kimi chunk library, P shapes, both gates, same process, alternating;
# 3) experiments/2026-12-05-tunebfs/call1.sh (kda2 tune with the bfs twins; ncu of the M1 routes), time permitting.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
F=/tmp/f; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp || exit 3
el "fused GPU tests"
timeout 240 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider --maxfail=6 \
  > $F/test_fused.log 2>&1; echo "fused tests rc $?"
grep -E "^fused16" $F/test_fused.log | sed 's/^fused16 //' | head -40; tail -3 $F/test_fused.log
grep -E "^E  |Error" $F/test_fused.log | head -12
el "fused timing"
timeout 260 python3 experiments/2026-12-05-fused/time_fused.py /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json \
  P1 P2 P3 P4 P5 P6 K1 K2 K3 K4 K5 K6 K7 K8 K9 K10 > $F/time_fused.log 2>&1; echo "timing rc $?"; cat $F/time_fused.log | tail -30
cp -r $F $OUT/fused
el "tune + ncu"
[ $(( $(date +%s) - T0 )) -lt 250 ] && timeout 330 bash experiments/2026-12-05-tunebfs/call1.sh 2>&1 | tail -80
el done
