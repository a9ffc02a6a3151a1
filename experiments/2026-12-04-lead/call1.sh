#!/usr/bin/env bash
# Device call 1 (H200): the bulk decode kernels ask L2, at entry, for the state tile of the CTA a resident wave later
# (recurrent.cuh bulk_prefetch_ahead; lead SMs x MIN_CTAS CTAs in build/_ab/pf, twice that in build/_ab/pf2), against
# HEAD's routed build (build/_ab/rec, no such prefetch). The recurrent GPU tests on pf, then D1, D2, D3, M1 in both
# layouts for each library, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, bench_libs, finish
rec_tests build/_ab/pf/kimi_linear_recurrent
bench_libs D1,D2,D3,M1 rec pf pf2
finish call1
