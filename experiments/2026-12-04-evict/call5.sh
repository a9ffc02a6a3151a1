#!/usr/bin/env bash
# Device call 5 (H200): what M1's per-token reductions cost — HEAD's routed kernels with the v_first blocked step's
# reduce-scatter replaced by the lane's own sums added (nosc.patch) and also without the per-column v' broadcast
# (nored.patch); timing only, outputs wrong (k_first kernels untouched) — against HEAD's (build/_ab/rec): D3, M1
# alternating, two rounds. HEAD's benchmark prints its timing floor (kda2.bench.timing floor_us).
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, bench_libs, finish
tar xJf build/_ab/libs3.tar.xz || exit 3
bench_libs D3,M1 rec nosc nored
grep -h "timing floor" $O/dec_rec_1.log $O/dec_rec_2.log
finish call5
