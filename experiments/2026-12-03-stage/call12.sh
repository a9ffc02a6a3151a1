#!/usr/bin/env bash
# Device call 12: xskip.patch (the exact path only where the pair's step-3 loop left a channel out) against HEAD
# 3316b53: bits of five unsplit cases and the two-round A/B (pipes/call2.sh). Before it: `mkvariants.sh base xskip`;
# carry build/_ab.
CALL=call12 bash experiments/2026-12-03-pipes/call2.sh xskip
