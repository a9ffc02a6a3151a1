#!/usr/bin/env bash
# Device call 7, carry ["build/_ab/vall.tar.xz"]: form e1, the tree's since calls 5–6 (never itself through the tests:
# f and i, which share its arithmetic, were): the fp64 GPU tests, then its time against the routed library and, on
# the bounded gate, cuDNN-FE's fused kernel where importable (P3, P4, K10, K5; same process, alternating).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
F=/tmp/f7; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp || exit 3
el "fused GPU tests"
timeout 150 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider \
  --maxfail=4 > $F/test_fused.log 2>&1; echo "tests rc $?"
grep -E "^fused16" $F/test_fused.log | sed 's/^fused16 //' | sort -t' ' -k5 -g | tail -2
tail -1 $F/test_fused.log; grep -E "^E  |Error" $F/test_fused.log | head -8
el "timing"
FUSED_SPLIT=0 timeout 150 python3 experiments/2026-12-05-fused/time_fused.py /tmp/vall/kimi_linear_chunk/sm_90a \
  $F/time_fused.json P3 P4 K10 K5 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
cp -r $F $OUT/call7
el done
