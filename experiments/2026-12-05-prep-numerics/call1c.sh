#!/usr/bin/env bash
# One device call for calls 1a and 1b (a machine given back after 30 s idle would not wait for a second call): the
# tests, then one A/B round if at least 250 s of the call's 600 are left, a second round if 250 s still are.
T0=$(date +%s)
bash experiments/2026-12-05-prep-numerics/call1a.sh
for r in 1 2; do
  left=$(( 590 - ($(date +%s) - T0) ))
  if [ "$left" -lt 250 ]; then echo "call1c: ${left} s left, A/B round $r skipped"; break; fi
  ROUNDS=$r bash experiments/2026-12-05-prep-numerics/call1b.sh
done
