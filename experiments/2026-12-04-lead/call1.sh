#!/usr/bin/env bash
# Device call 1 (H200): the bulk decode kernels ask L2, at entry, for the state tile of the CTA a resident wave later
# (recurrent.cuh bulk_prefetch_ahead; lead SMs x MIN_CTAS CTAs in build/_ab/pf, twice that in build/_ab/pf2), against
# HEAD's routed build (build/_ab/rec, no such prefetch). The recurrent GPU tests on pf, then D1, D2, D3, M1 in both
# layouts for each library, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, summ, finish
rec_tests build/_ab/pf/kimi_linear_recurrent
for r in 1 2; do for lib in rec pf pf2; do
  el "bench round $r $lib"
  timeout 90 python3 -m kda2.bench recurrent --no-fla --library build/_ab/$lib/kimi_linear_recurrent --shapes D1,D2,D3,M1 \
    --out $O/dec_${lib}_$r > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
done; done
finish call1
