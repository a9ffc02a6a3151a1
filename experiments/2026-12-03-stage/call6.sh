#!/usr/bin/env bash
# Device call 6 (prepared, not run): refl.patch against HEAD (918c149 or later with the same kernels): bits of five
# unsplit cases and the two-round A/B (pipes/call2.sh; tarball call6.tgz), then refl applied to the working tree's three
# chunk specs: bits against HEAD's (v_b64, v_base, v_b256) and the chunk GPU tests at K = 64, 128, 256 (pipes/call3.sh;
# tarball call6_tests.tgz). Before it, on the build host: `mkvariants.sh base b64 b256 refl`, then `git apply
# refl.patch` and `kda2 build -j2 kimi_linear_chunk small_head_chunk large_head_chunk -- -Q build/<spec>/sm_90a …`.
# Carry build/_ab and build/{kimi_linear,small_head,large_head}_chunk. Same bits expected (the same sums in the same
# order); the trace (call5.sh with trace_prep.py on the patched header) shows whether the end-of-step-4 wait moved.
CALL=call6 bash experiments/2026-12-03-pipes/call2.sh refl
TESTS_ONLY=1 CALL=call6_tests bash experiments/2026-12-03-pipes/call3.sh
