#!/usr/bin/env bash
# Device call 15: the state pass with its slots hot in L2 (hot.patch: every chunk reads chunk 0's or 1's slot; outputs
# wrong, timing only) against HEAD's build, every kernel of P1 and P3 under ncu at boost clocks (call16.sh's body; the
# call ran with the digest inline, ncu_split_table.py now). Before it: `mkvariants.sh base hot`; carry build/_ab.
VARIANTS="base hot" CALL=call15 bash experiments/2026-12-03-stage/call16.sh
