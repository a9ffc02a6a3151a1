#!/usr/bin/env bash
# Device call 3 (H200): are the overlapped launches (P2, P5) bound by the prep's throughput or by the state chain?
# The routed Kimi chunk library against the same with step 3 removed from the prep (as3: ablate.py s3 on HEAD;
# outputs wrong, timing only), library's own launch choice, alternating, two rounds (lead_ab.py), and P1 / P3 for
# scale (plain launches).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/all.tar.xz -C /tmp/ab && tar xJf build/_ab/abl.tar.xz -C /tmp/ab || exit 3
timeout 200 python3 experiments/2026-12-02-prep-levels/lead_ab.py 2 /tmp/ab/build/kimi_linear_chunk/sm_90a \
  /tmp/ab/as3/kimi_linear_chunk/sm_90a 2>&1 | tee $O/lead_ab.log
for lib in build/kimi_linear_chunk as3/kimi_linear_chunk; do
  timeout 60 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/$lib/sm_90a --shapes P1,P3 --gates softplus \
    --out $O/p_$(dirname $lib | tr / _) 2>&1 | grep -E "^ P[1-6]"
done
tar czf $OUT/call3.tgz -C /tmp o
