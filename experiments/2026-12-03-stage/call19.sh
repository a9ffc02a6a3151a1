#!/usr/bin/env bash
# Device call 19: the prep without its tile copies (noload.patch; timing only) against HEAD: what the load phase —
# the copies' issue and their wait — costs at most (pipes/call2.sh: two rounds, P1–P6 softplus and K3). Before it:
# `mkvariants.sh base noload`; carry build/_ab.
CALL=call19 bash experiments/2026-12-03-pipes/call2.sh noload
