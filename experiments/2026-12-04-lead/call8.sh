#!/usr/bin/env bash
# Device call 8 (H200): the entry L2 prefetch also in the direct v_first kernels at MIN_CTAS 1 (their tile is contiguous:
# one bulk prefetch; the D2 v_first route 554e3bb662b7 is one). Routed Kimi recurrent builds: HEAD (c9c9e8a, build/_ab/cur)
# and this (build/_ab/dv). Recurrent GPU tests on dv, then D1, D2, D3, M1, S1, S2, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, summ, finish
rec_tests build/_ab/dv/kimi_linear_recurrent
for r in 1 2; do for lib in cur dv; do
  el "bench round $r $lib"
  timeout 90 python3 -m kda2.bench recurrent --no-fla --library build/_ab/$lib/kimi_linear_recurrent --shapes D1,D2,D3,M1,S1,S2 \
    --out $O/dec_${lib}_$r > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
done; done
finish call8
