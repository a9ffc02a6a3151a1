#!/usr/bin/env bash
# Device call 2 (H200): P1-P6 (softplus) on the routed Kimi chunk library with overlap left to the library, asked
# for and refused, alternating, two rounds (overlap_ab.py): does the overlapped launch, now that the prep is held
# 8 chunks ahead, pay where the default does not take it (P1: 128 state CTAs; P3, P4, P6: fewer than 128 chunks)?
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/all.tar.xz -C /tmp/ab || exit 3
timeout 280 python3 experiments/2026-12-02-retune/overlap_ab.py 2 /tmp/ab/build/kimi_linear_chunk/sm_90a 2>&1 | tee $O/overlap_ab.log
tar czf $OUT/call2.tgz -C /tmp o
