#!/usr/bin/env bash
# Device call 6 (H200): where M1's tokens' 7.2 µs go — HEAD's routed build (rec), no tokens at all (notok.patch),
# and the v_first multi-token kernel landing and preparing its tokens' inputs but running no step (preponly.patch;
# k_first untouched); timing only. M1 alternating, three rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, bench_libs, finish
tar xJf build/_ab/libs4.tar.xz || exit 3
bench_libs M1 rec notok preponly
el "round 3"
for lib in rec notok preponly; do
  timeout 90 python3 -m kda2.bench recurrent --no-fla --library build/_ab/$lib/kimi_linear_recurrent --shapes M1 \
    --out $O/dec_${lib}_3 > $O/dec_${lib}_3.log 2>&1 && summ $O/dec_${lib}_3/bench_recurrent.json "$lib 3"
done
finish call6
