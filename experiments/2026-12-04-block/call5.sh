#!/usr/bin/env bash
# Device call 5 (H200): the k_map = all token step's sums over K in ACC_PARTS partial sums per column (recurrent.cuh
# run_all_k; a lane's 32 rows were one dependent FMA chain per sum): the routed Kimi recurrent build at ACC_PARTS = 2
# (build/_ab/p2) and 4 (build/_ab/p4) against HEAD's (build/_ab/rec, one chain). The recurrent GPU tests on p4, then
# the k_first decode rows D1, D2, D3, M1 (all on k_map = all routes) and v_first M1 (untouched), alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, bench_libs, finish
rec_tests build/_ab/p4/kimi_linear_recurrent
bench_libs D1,D2,D3,M1 rec p2 p4
finish call5
