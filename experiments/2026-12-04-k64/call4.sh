#!/usr/bin/env bash
# Device call 4 (H200), carry ["build/_ab/new64b.tar.xz"]: the K = 64 library with the split rule's 8-chunk segments
# (kda2.plan.smem SPLIT_MIN_CHUNKS, fitted on call 3's grid): the split GPU tests (the library's choice is the
# planner's rule; every split exact) and call 3's 105-shape grid on it.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/new64b.tar.xz -C /tmp || exit 3
NEW=/tmp/vnew64b/small_head_chunk/small_head_chunk/sm_90a
timeout 100 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py -q --require-gpu --chunk-library $NEW \
  -rs -p no:cacheprovider > $O/gpu_split64.log 2>&1; echo "tests rc $?"; tail -1 $O/gpu_split64.log
grep -E "^FAILED|^ERROR" $O/gpu_split64.log | head
G=""; for t in 2048 3072 4096 5120 6144 8192 12288 16384 32768; do for h in 1 2 3 4 6 8 12 16 20 24 32; do
  G="$G B1T${t}H$h"; done; done
G="$G B2T4096H8 B2T8192H4 B4T4096H4 B2T16384H8 B2T4096H16 B4T8192H4"
timeout 100 python3 experiments/2026-12-04-k64/grid.py $NEW/manifest.json $O/grid64_rule.json $G > $O/grid64_rule.log 2>&1
echo "grid rc $?"; tar czf $OUT/call4.tgz -C /tmp o
