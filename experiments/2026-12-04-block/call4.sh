#!/usr/bin/env bash
# Device call 4 (H200): M1 v_first on 8-column bulk tiles (specs/m1_vpw8.yaml, HEAD's kernel code, vendored as
# build/_ab/m1): 94 registers, five CTAs of 4 warps per SM (20 warps, against the route's 16), and its 8-warp twin
# (two CTAs). The multi-token GPU tests by index on that library, then HEAD's route (d5e2e307b97b, HEAD's routed
# build build/_ab/rec) against both, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, bench_one, finish
M1L=build/_ab/m1/m1_vpw8; OLD=build/_ab/rec/kimi_linear_recurrent
el "multi-token GPU tests ($M1L)"
KDA2_LIBRARY=$M1L timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py -k "multi_token" -q \
  --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_m1.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_m1.log; grep -E "^FAILED|^ERROR" $O/gpu_m1.log | head -8
for r in 1 2; do
  for run in "head $OLD d5e2e307b97b" "o5 $M1L 9c70d4c6cd46" "w8 $M1L 6263fec08f80"; do
    read -r tag lib v <<< "$run"
    bench_one ${tag}_$r "r$r $tag $v" $lib M1 v_first $v
  done
done
finish call4
