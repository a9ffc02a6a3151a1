#!/usr/bin/env bash
# Device call 6 (H200): the few-chain set F1-F4 with the bounded gate, this build against cuDNN's fused kernel on its
# own gate (no FLA: its bounded-gate Triton warm-up did not fit the device time left).
. experiments/2026-12-03-peers/dev.sh
. experiments/2026-12-03-wgfold/steps.sh
timeout 200 python3 -m kda2.bench chunk --library ${NEW[128]} --shapes f --gates lower_bound --no-fla --out $O/f_lb \
  > $O/f_lb.log 2>&1; echo "f lower_bound rc $?"; grep -E "^\| F" $O/f_lb/bench_chunk.md
finish call6
