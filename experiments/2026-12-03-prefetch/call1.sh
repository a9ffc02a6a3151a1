#!/usr/bin/env bash
# Device calls 1 and 3 (H200): the prep variants built by mkvariants.sh (build/_ab/v_<name>) against HEAD's build
# (v_base) — bits of five unsplit cases, then P1–P6 (softplus) and the K3 set, every build once per round, two rounds,
# the second in reverse order — by the pipes experiment's A/B script. CALL names the tarball (call 3: CALL=call3).
CALL=${CALL:-call1} exec bash experiments/2026-12-03-pipes/call2.sh "$@"
