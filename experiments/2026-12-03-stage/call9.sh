#!/usr/bin/env bash
# Device call 9: cmaj.patch (the plain prep grid read value head fastest, then chunk) against HEAD 9ad3e00: bits of
# five unsplit cases and the two-round A/B (pipes/call2.sh). Before it: `mkvariants.sh base cmaj`; carry build/_ab.
CALL=call9 bash experiments/2026-12-03-pipes/call2.sh cmaj
