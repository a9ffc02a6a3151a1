#!/usr/bin/env bash
# Device call 8 (H200): the entry L2 prefetch also in the direct v_first kernels at MIN_CTAS 1 (their tile is contiguous:
# one bulk prefetch; the D2 v_first route 554e3bb662b7 is one). Routed Kimi recurrent builds: HEAD (c9c9e8a, build/_ab/cur)
# and this (build/_ab/dv). Recurrent GPU tests on dv, then D1, D2, D3, M1, S1, S2, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, bench_libs, finish
rec_tests build/_ab/dv/kimi_linear_recurrent
bench_libs D1,D2,D3,M1,S1,S2 cur dv
finish call8
