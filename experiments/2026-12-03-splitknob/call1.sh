#!/usr/bin/env bash
# Device call 1 (H200): the split == 1 fast path in the state passes (chunk.cuh segment_of, the CTA's sequence
# without a division) and the split knob per dispatch row, on the every-candidate build of kimi_linear_chunk (its
# rows route as HEAD's: the same tuning record). 1) bits of unsplit calls, HEAD's vendored build vs this one.
# 2) kda2 bench P1-P6 softplus and the K3 set, both libraries alternating, two rounds (no peers). 3) chunk GPU tests
# (the split module with the row-knob test, the accuracy cases without FLA, the overlap module). 4) kda2 tune: every
# candidate, and the split rows timed at their fewest chains.
. experiments/2026-12-03-splitknob/dev.sh
el "bits"
bits_vs_head; tail -3 $O/bits.log
el "bench P (softplus) and K3 (lower_bound), old / new alternating"
ab_pk3 2-5
el "GPU tests"
timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_gpu.py \
  tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library $NEW --fla-cases none -rs -p no:cacheprovider \
  > $O/gpu.log 2>&1; echo "gpu rc $?"; tail -1 $O/gpu.log; grep -E "^FAILED|^ERROR" $O/gpu.log | head
el "tune"
timeout 200 python3 -m kda2.tools.cli tune $NEW --tuning $O/tuning --margin 0.2 --time-limit 150 > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  |wrote" $O/tune.log | tail -24
finish call1
