#!/usr/bin/env bash
# Device call 4 (H200): the recurrent kernels' state traffic at the default cache policy (__ldca / __stwb instead of
# __ldcs / __stcs; the working tree). Every candidate of the Kimi recurrent spec (build/_ab/all.tar.xz): the recurrent
# GPU tests with every kind forced, kda2 tune (the record the product keeps), then per decode row HEAD's route in HEAD's
# routed library (build/_ab/rec, __ldcs) against the same variant and the new winner in the new build, alternating,
# two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, unpack, rec_tests, tune, ab_routes, finish
unpack all
NEW=/tmp/ab/build/_all/kimi_linear_recurrent; OLD=build/_ab/rec/kimi_linear_recurrent
rec_tests $NEW
tune $NEW kimi_linear_recurrent.h200.json
declare -A ROUTE=([D2:k_first]=82cd905a6b51 [D2:v_first]=554e3bb662b7 [D3:k_first]=6a5ac3c71ebb [D3:v_first]=2674d2450fe7
                  [D1:k_first]=add37fbc6a17 [D1:v_first]=079885349c53 [M1:k_first]=76ee8257a276 [M1:v_first]=d5e2e307b97b)
declare -A CLS=([D1]="1 decode-n1" [D2]="1 decode-n64" [D3]="1 decode-n256" [M1]="8 decode-n64")
ab_routes $OLD $NEW D2:v_first D2:k_first D3:v_first D3:k_first M1:v_first M1:k_first D1:v_first D1:k_first
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
finish call4
