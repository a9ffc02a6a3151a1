#!/usr/bin/env bash
# Device call 2 (H200): s6one, hdiv and full (mkvariants.sh, on HEAD fd8d412 = call 1's both) against HEAD (v_base):
# bits of five unsplit cases, then P1–P6 (softplus) and the K3 set, two rounds, the order reversed in the second
# (experiments/2026-12-03-pipes/call2.sh; tarball call2.tgz). Carry build/_ab.
CALL=call2 bash experiments/2026-12-03-pipes/call2.sh s6one hdiv full
