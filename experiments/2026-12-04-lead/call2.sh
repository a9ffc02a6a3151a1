#!/usr/bin/env bash
# Device call 2 (H200): the lead and the form of the entry L2 prefetch (recurrent.cuh bulk_prefetch_ahead). Call 1 had
# the lead at SMs x MIN_CTAS CTAs: D3 3 % faster (MIN_CTAS 1), M1 and D2 k_first 25-27 % slower (MIN_CTAS 4). Here
# pfA: bulk prefetch, lead SMs; pfB: lead SMs / 2; pfC: per-line prefetch.global.L2 by the last warp, lead SMs;
# against HEAD (rec) and call 1's pf. GPU tests on pfC, then D2, D3, M1, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, summ, finish
rec_tests build/_ab/pfC/kimi_linear_recurrent
for r in 1 2; do for lib in rec pf pfA pfB pfC; do
  el "bench round $r $lib"
  timeout 90 python3 -m kda2.bench recurrent --no-fla --library build/_ab/$lib/kimi_linear_recurrent --shapes D2,D3,M1 \
    --out $O/dec_${lib}_$r > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
done; done
finish call2
