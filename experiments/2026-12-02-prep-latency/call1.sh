#!/usr/bin/env bash
# Device call (H200): the chunk prep kernel's duration under ncu at boost clocks (--clock-control none) for 128, 256
# and 8192 items of one 8192-token sequence (prep_latency.py), routed Kimi chunk library (build/_ab/vC.tar.xz).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/vC.tar.xz -C /tmp/ab || exit 3
timeout 200 ncu --clock-control none --kernel-name regex:kda2_chunk_prep --metrics gpu__time_duration.sum,launch__grid_size,sm__cycles_active.avg,smsp__inst_executed.sum \
  python3 experiments/2026-12-02-prep-latency/prep_latency.py /tmp/ab/_vC/kimi_linear_chunk > $O/ncu_prep.txt 2>&1; echo "ncu rc $?"
grep -E "H=|gpu__time_duration|launch__grid_size|inst_executed|cycles_active" $O/ncu_prep.txt | head -60
tar czf $OUT/call1.tgz -C /tmp o
