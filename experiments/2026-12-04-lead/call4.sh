#!/usr/bin/env bash
# Device call 4 (H200): the entry L2 prefetch as kept (recurrent.cuh bulk_prefetch_ahead: bulk kernels at MIN_CTAS 1,
# lead SMs CTAs). Every candidate of the Kimi recurrent spec built from the working tree (build/_ab/all.tar.xz,
# sm_90a): the recurrent GPU tests with every kind forced, then kda2 tune into a fresh record.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, unpack, rec_tests, tune, finish
unpack all
NEW=/tmp/ab/build/_all/kimi_linear_recurrent
rec_tests $NEW
tune $NEW kimi_linear_recurrent.h200.json
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
finish call4
