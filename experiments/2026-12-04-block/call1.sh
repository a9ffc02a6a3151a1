#!/usr/bin/env bash
# Device call 1 (H200): multi-token decode as one block (recurrent.cuh BLOCKF, the working tree). Every candidate of
# the Kimi recurrent spec built from it (build/_ab/all.tar.xz): the recurrent GPU tests with every kind forced (the
# multi-token candidates by index: T 2 / 4 / 8 with per-token states, T 13 and varlen past the bucket), kda2 tune;
# then M1 (N = 64, T = 4) per layout: HEAD's route in HEAD's routed library (build/_ab/rec), the same variant in the
# new build and the new winner, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, unpack, rec_tests, tune, ab_routes, finish
unpack all
NEW=/tmp/ab/build/_all/kimi_linear_recurrent; OLD=build/_ab/rec/kimi_linear_recurrent
rec_tests $NEW
tune $NEW kimi_linear_recurrent.h200.json
declare -A ROUTE=([M1:k_first]=76ee8257a276 [M1:v_first]=d5e2e307b97b)
declare -A CLS=([M1]="8 decode-n64")
ab_routes $OLD $NEW M1:v_first M1:k_first
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
finish call1
