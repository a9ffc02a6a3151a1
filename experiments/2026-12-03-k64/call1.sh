#!/usr/bin/env bash
# Device call 1 (H200): the default small_head_recurrent (K = V = 64) widened to both state layouts and every gate
# mode, built on the CPU host (build/small_head_recurrent, carried), then the recurrent GPU tests and the issue-13
# matrix with FLA 0.6.0's fused_recurrent_kda on every case. Ran on the routed build: its `kda2 tune` refused it (tuning
# times every candidate), so call 2 repeats both on the every-candidate build. Setup (wheels, $O, el, finish):
# ../2026-12-03-peers/dev.sh.
. experiments/2026-12-03-peers/dev.sh
. experiments/2026-12-03-k64/steps.sh
L=build/small_head_recurrent/sm_90a
tune_step 150 120 4
rec_tests 400 --fla-recurrent=all
cut -d'|' -f2-9 $O/recurrent-accuracy.md | head -40
finish call1
