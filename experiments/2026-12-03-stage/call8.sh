#!/usr/bin/env bash
# Device call 8: the prep trace from the middle of the grid with two more marks in step 3's exchange (`trace_prep.py
# --mid` applied to chunk.cuh at 9ad3e00, built as call5.sh says into build/_trace). Carry build/_trace.
CALL=call8 bash experiments/2026-12-03-stage/call5.sh
