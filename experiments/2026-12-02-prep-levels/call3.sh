#!/usr/bin/env bash
# Device call 3 (H200): an overlapped prep held at most PREP_LEAD chunks ahead of its chain's state pass (vT3, vT8,
# vT24; on top of vN's tensor-core levels), P2 / P5 with the library's own launch choice, against vO and vN,
# alternating, two rounds; the overlap GPU tests on vT8.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/lead.tar.xz -C /tmp/ab || exit 3
L=""; for v in vO vN vT3 vT8 vT24; do L="$L /tmp/ab/_$v/kimi_linear_chunk"; done
timeout 120 python3 experiments/2026-12-02-prep-levels/lead_ab.py 2 $L > $O/lead_ab.log 2>&1; echo "lead_ab rc $?"; cat $O/lead_ab.log
timeout 60 python3 -m pytest -m gpu tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library /tmp/ab/_vT8/kimi_linear_chunk \
  -p no:cacheprovider > $O/gpu_overlap_vT8.log 2>&1; echo "overlap tests rc $?"; tail -1 $O/gpu_overlap_vT8.log
tar czf $OUT/call3.tgz -C /tmp o
