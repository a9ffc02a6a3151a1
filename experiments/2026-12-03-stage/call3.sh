#!/usr/bin/env bash
# Device call 3 (H200): s6one + hdiv and s6one + hdiv + u2 (mkvariants.sh) against HEAD (v_base): bits of five unsplit
# cases, P1–P6 (softplus) and the K3 set, two rounds (pipes/call2.sh; tarball call3.tgz); then s6one + hdiv applied to
# the working tree's three chunk specs: bits against HEAD's (v_b64, v_base, v_b256) and the chunk GPU tests at K = 64,
# 128, 256 (pipes/call3.sh; tarball call3_tests.tgz). Carry build/_ab and build/{kimi_linear,small_head,large_head}_chunk.
CALL=call3 bash experiments/2026-12-03-pipes/call2.sh s6one+hdiv s6one+hdiv+u2
TESTS_ONLY=1 CALL=call3_tests bash experiments/2026-12-03-pipes/call3.sh
