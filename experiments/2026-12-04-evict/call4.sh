#!/usr/bin/env bash
# Device call 4 (H200): how much of a decode call the tokens' work costs at all — HEAD's routed kernels with every
# call's token count forced to 0 (notok.patch, timing only: each CTA lands its state tile and writes it back, nothing
# else; outputs wrong) against HEAD's (build/_ab/rec): D2, M1 alternating, two rounds, then scale.py on both.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, bench_libs, summ, finish
tar xJf build/_ab/libs2.tar.xz || exit 3   # build/_ab/rec, build/_ab/notok
bench_libs D2,D3,M1 rec notok
for lib in notok; do
  el "scale $lib"
  timeout 150 python3 experiments/2026-12-04-evict/scale.py $O/scale_$lib build/_ab/$lib/kimi_linear_recurrent > $O/scale_$lib.log 2>&1 \
    && summ $O/scale_$lib/bench_recurrent.json "scale $lib" || tail -3 $O/scale_$lib.log
done
finish call4
