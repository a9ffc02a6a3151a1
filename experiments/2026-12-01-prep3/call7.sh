#!/usr/bin/env bash
# Device call 7 (H200): the plain path before and after the overlap change, in one run: call 2's build (ABI 4, under
# main's runtime) and the final one (ABI 5) alternating on P1-P6, both gates, three rounds (no routed variant
# overlaps, so a difference would be the new prep entry, the carveout or the ready region). Call 8: the same with a
# third build, the carveout set only on variants that can overlap (VARIANTS="old new g").
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
for round in 1 2 3; do
  for v in ${VARIANTS:-old new}; do
    if [ $v = old ]; then PP=$ROOT/build/_oldsrc; L=build/_vendD/kimi_linear_chunk/kimi_linear_chunk/sm_90a
    elif [ $v = g ]; then PP=$ROOT/src; L=build/_vendG/kimi_linear_chunk/kimi_linear_chunk/sm_90a
    else PP=$ROOT/src; L=build/_vendF/kimi_linear_chunk/kimi_linear_chunk/sm_90a; fi
    PYTHONPATH=$PP timeout 120 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes p \
      --gates softplus,lower_bound --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "$v $round rc $?"
  done
done
PYTHONPATH=$ROOT/src python3 experiments/2026-12-01-prep3/ab.py $O ${VARIANTS:-old new} | tee $O/ab.txt
rm -f $O/b_*/*.png
tar czf $OUT/${CALL:-call7}.tgz -C /tmp o
