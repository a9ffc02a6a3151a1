#!/usr/bin/env bash
# Not run as such: chain.patch ran later as experiments/2026-12-02-tf32/call1.sh's "chain" build (README). Built then: build/_ab/chunk_chain.tar.xz (chain.patch on 737cf95) and
# build/_ab/chunk_head.tar.xz (737cf95); if build/ is gone, rebuild both (apply chain.patch in a worktree).
# Device call 9 (H200): a plain launch's whole chain as programmatic dependents (prep → fold → combine → state on
# split calls; chunk.cuh chain_step, library.cpp.j2 launch_dependent). old = HEAD (only the unsplit state pass after
# the prep), new = the chain. Chunk GPU tests on new; same bits; the K3 set (split by default) and P1-P6, alternating.
OLD_TAR=chunk_head.tar.xz NEW_TAR=chunk_chain.tar.xz
. experiments/2026-12-02-trail/ab_env.sh
tests_and_bits
el bench
bench_k3 2
bench_p 1
el done
rm -f $O/*/*.png $O/*.pt; cp -r $O $OUT/
