#!/usr/bin/env bash
# Device call 6 (H200): the overlapped wgmma state pass reads the next slot's ready flag a step early (chunk.cuh
# peek_ready: a relaxed read issued among the step's MMAs) instead of acquiring it at the step's top behind a CTA
# barrier. old = HEAD's routed Kimi chunk library, new = with the early read. Overlap / split / chunk GPU tests on new;
# same bits; P1-P6 softplus alternating, three rounds.
OLD_TAR=chunk_head.tar.xz NEW_TAR=chunk_peek.tar.xz
. experiments/2026-12-02-trail/ab_env.sh
tests_and_bits
el bench
bench_p 3
el done
rm -f $O/*/*.png $O/*.pt; cp -r $O $OUT/
