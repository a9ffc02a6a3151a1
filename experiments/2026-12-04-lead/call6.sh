#!/usr/bin/env bash
# Device call 6 (H200): the routed Kimi recurrent build with call 4's tune (build/_ab/new: the entry L2 prefetch in the
# MIN_CTAS 1 bulk kernels; D2 k_first now on 6a5ac3c71ebb) against HEAD's routed build (build/_ab/rec): the recurrent
# GPU tests on new, then D1, D2, D3, M1 in both layouts, alternating, two rounds (the README's decode table).
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, bench_libs, finish
rec_tests build/_ab/new/kimi_linear_recurrent
bench_libs D1,D2,D3,M1 rec new
finish call6
