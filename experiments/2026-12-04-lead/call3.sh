#!/usr/bin/env bash
# Device call 3 (H200): the D3 routes (bulk, one CTA of 168 / 162 registers: no MIN_CTAS) forced at D2 and M1, against
# those rows' routes, in HEAD's build (rec) and with the entry L2 prefetch at a lead of SMs CTAs (pfA): does a bulk
# kernel that the prefetch speeds up beat the D2 / M1 routes? Alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, bench_one, finish
for r in 1 2; do
  for key in D2:v_first:554e3bb662b7 D2:v_first:2674d2450fe7 D2:k_first:82cd905a6b51 D2:k_first:6a5ac3c71ebb \
             M1:v_first:d5e2e307b97b M1:v_first:2674d2450fe7 M1:k_first:76ee8257a276 M1:k_first:6a5ac3c71ebb; do
    IFS=: read -r s l v <<< "$key"
    for lib in rec pfA; do bench_one ${s}_${l}_${v}_${lib}_$r "r$r $lib $s $l $v" build/_ab/$lib/kimi_linear_recurrent $s $l $v; done
  done
done
finish call3
