#!/usr/bin/env bash
# Device call 4 (H200): l2n2, scanbar and both (l2nscan) against HEAD (v_base) by call1.sh (bits, two-round A/B at
# K = 128; tarball call4.tgz); then, both patches applied to the working tree's three chunk specs, their bits against
# HEAD's (v_b64, v_base, v_b256) and the chunk GPU tests at K = 64, 128, 256 (tarball call4_tests.tgz).
CALL=call4 bash experiments/2026-12-03-prefetch/call1.sh l2n2 scanbar l2nscan
TESTS_ONLY=1 CALL=call4_tests bash experiments/2026-12-03-pipes/call3.sh
