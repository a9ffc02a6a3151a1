#!/usr/bin/env bash
# Device call 1 (H200): dinv and both (mkvariants.sh) against HEAD (v_base) — bits of five unsplit cases, then P1–P6
# (softplus) and the K3 set, two rounds, the order reversed in the second (experiments/2026-12-03-pipes/call2.sh;
# tarball call1.tgz); then, both patches applied to the working tree's three chunk specs, their bits against HEAD's
# (v_b64, v_base, v_b256) and the chunk GPU tests at K = 64, 128, 256 (pipes/call3.sh; tarball call1_tests.tgz).
# Carry build/_ab and build/{kimi_linear,small_head,large_head}_chunk.
CALL=call1 bash experiments/2026-12-03-pipes/call2.sh dinv both
TESTS_ONLY=1 CALL=call1_tests bash experiments/2026-12-03-pipes/call3.sh
