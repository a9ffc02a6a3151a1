#!/usr/bin/env bash
# Device call 1 (H200): the overlapped prep's lead (PREP_LEAD 8 = HEAD, 12, 16 chunks ahead of its chain), built by
# experiments/2026-12-02-retune/lead_builds.sh; P2 / P5 (the shapes the routed library overlaps) alternating, three
# rounds (experiments/2026-12-02-prep-levels/lead_ab.py), then the overlap and split GPU tests on L12 and L16.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/lead.tar.xz -C /tmp || exit 3
L=/tmp/_lead
timeout 200 python3 experiments/2026-12-02-prep-levels/lead_ab.py 3 $L/L8/kimi_linear_chunk $L/L12/kimi_linear_chunk \
  $L/L16/kimi_linear_chunk 2>&1 | tee $O/lead_ab.log
el tests
G="tests/gpu/test_chunk_overlap_gpu.py tests/gpu/test_chunk_split_gpu.py"
for n in 12 16; do
  timeout 120 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library $L/L$n/kimi_linear_chunk/sm_90a \
    -rs -p no:cacheprovider > $O/gpu_L$n.log 2>&1; echo "L$n gpu tests rc $?"; tail -1 $O/gpu_L$n.log
  grep -E "^FAILED|^ERROR" $O/gpu_L$n.log | head -4
done
el done
cp -r $O $OUT/
