#!/usr/bin/env bash
# Device call 1 (H200): two cache-policy variants of the recurrent kernels against HEAD's routed build (build/_ab/rec):
# el — the L2 prefetch of the next wave's tile in every bulk kernel (also the 4-CTA ones), with an evict-last policy
# (evict_last.patch); wb — the state's global stores write-back (__stwb) instead of evict-first (__stcs), loads
# unchanged (stwb.patch). The recurrent GPU tests on each, then D2, D3, M1 in both layouts, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, bench_libs, finish
for v in el wb; do rec_tests build/_ab/$v/kimi_linear_recurrent; mv $O/gpu_recurrent.log $O/gpu_recurrent_$v.log; done
bench_libs D2,D3,M1 rec el wb
finish call1
