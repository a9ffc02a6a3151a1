#!/usr/bin/env bash
# Device call 7 (H200): the raised (4-CTA) bulk kernels ask L2 for their successor's tile once their own has landed
# (postpf.patch: lead %nsmid x MIN_CTAS, issued after the tile's wait instead of at entry) against HEAD's routed
# build: the recurrent GPU tests on it, then M1 and D2 alternating, three rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, bench_libs, finish
tar xJf build/_ab/libs5.tar.xz || exit 3
rec_tests build/_ab/postpf/kimi_linear_recurrent
bench_libs M1,D2 rec postpf
el "round 3"
for lib in rec postpf; do
  timeout 90 python3 -m kda2.bench recurrent --no-fla --library build/_ab/$lib/kimi_linear_recurrent --shapes M1,D2 \
    --out $O/dec_${lib}_3 > $O/dec_${lib}_3.log 2>&1 && summ $O/dec_${lib}_3/bench_recurrent.json "$lib 3"
done
finish call7
