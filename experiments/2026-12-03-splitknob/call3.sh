#!/usr/bin/env bash
# Device call 3 (H200): kda2 tune of the every-candidate builds of small_head_chunk (K = 64) and large_head_chunk
# (K = 256), so that their split rows are timed too (call 1 tuned kimi_linear_chunk); carried with build/.kda2 (the plan
# cache tune reads).
. experiments/2026-12-03-splitknob/dev.sh
for S in small_head_chunk large_head_chunk; do
  el "tune $S"
  timeout 220 python3 -m kda2.tools.cli tune build/$S/sm_90a --tuning $O/tuning --margin 0.2 --time-limit 180 \
    > $O/tune_$S.log 2>&1
  echo "tune $S rc $?"; grep -E "^  |wrote" $O/tune_$S.log | tail -16
done
finish call3
