#!/usr/bin/env bash
# Device call 1 (H200): the overlap asked for against refused at 48-132 state CTAs, 32-256 chunks (sweep.py), and
# what a stronger decay costs a call (decay.py), HEAD's kimi_linear_chunk as vendored (build/_ab/head.tar.xz).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/head.tar.xz -C /tmp || exit 3
L=/tmp/vhead/kimi_linear_chunk/sm_90a/manifest.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $O/gpu.txt
timeout 150 python3 experiments/2026-12-04-overlap/decay.py $L $O/decay.json P1 P3 P6 K3 B1T8192H32 > $O/decay.log 2>&1; echo "decay rc $?"
timeout 330 python3 experiments/2026-12-04-overlap/sweep.py $L $O/sweep.json > $O/sweep.log 2>&1; echo "sweep rc $?"
cut -c1-200 $O/decay.log; cut -c1-200 $O/sweep.log
tar czf $OUT/call1.tgz -C $O .
