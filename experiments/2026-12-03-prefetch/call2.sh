#!/usr/bin/env bash
# Device call 2 (H200): t16.patch applied to the working tree's three chunk specs (sm_90a): bits against HEAD's builds
# (v_b64, v_base, v_b256), the chunk GPU tests at K = 64, 128, 256, then HEAD and t16 alternating, three rounds — by
# the pipes experiment's script for the same steps.
NEW_LABEL="T16 beside level 2" CALL=call2 exec bash experiments/2026-12-03-pipes/call3.sh
