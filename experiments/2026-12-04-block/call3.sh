#!/usr/bin/env bash
# Device call 3 (H200): the reduce-scatter of the bulk v_first kernels with one sum per lane through shared memory
# (recurrent.cuh smem_reduce; the working tree). Every candidate of the Kimi recurrent spec built from it
# (build/_ab/all.tar.xz, sm_90a): the recurrent GPU tests with every kind forced, kda2 tune; then per row HEAD's route
# in HEAD's routed library (build/_ab/rec), the same variant in the new build and the new winner, alternating, two
# rounds: M1 and D3 v_first (their routes reduce this way), D2 v_first, M1 k_first (untouched: the yardsticks).
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, unpack, rec_tests, tune, ab_routes, finish
unpack all
NEW=/tmp/ab/build/_all/kimi_linear_recurrent; OLD=build/_ab/rec/kimi_linear_recurrent
rec_tests $NEW
tune $NEW kimi_linear_recurrent.h200.json
declare -A ROUTE=([M1:v_first]=d5e2e307b97b [D3:v_first]=2674d2450fe7 [D2:v_first]=554e3bb662b7 [M1:k_first]=76ee8257a276)
declare -A CLS=([M1]="8 decode-n64" [D3]="1 decode-n256" [D2]="1 decode-n64")
ab_routes $OLD $NEW M1:v_first D3:v_first D2:v_first M1:k_first
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
finish call3
