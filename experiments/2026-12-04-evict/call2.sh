#!/usr/bin/env bash
# Device call 2 (H200): the v_first bulk decode kernels move the state tile per warp (recurrent.cuh WARP_BULK: each
# warp's lane 0 copies the warp's VPW rows in and out; the store leaves without a CTA barrier, and at MIN_CTAS 1 each
# warp waits only for its own rows, WARP_WAIT) — build/_ab/wbk (routed) and /tmp/ab/build/_all2 (every candidate)
# against HEAD's routed build (build/_ab/rec). GPU tests on both, then D2, D3, M1, alternating, two rounds; then
# decode and multi-token decode at N = 64 … 512 on both routed libraries (scale.py).
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, rec_tests, bench_libs, finish
unpack all2; tar xJf build/_ab/libs.tar.xz || exit 3   # build/_ab/rec, build/_ab/wbk
rec_tests build/_ab/wbk/kimi_linear_recurrent; mv $O/gpu_recurrent.log $O/gpu_recurrent_routed.log
rec_tests /tmp/ab/build/_all2/kimi_linear_recurrent/sm_90a; mv $O/gpu_recurrent.log $O/gpu_recurrent_all.log
bench_libs D2,D3,M1 rec wbk
for lib in rec wbk; do  # the fixed share of a call: N = 64 … 512 at T = 1 and 4 (scale.py)
  el "scale $lib"
  timeout 150 python3 experiments/2026-12-04-evict/scale.py $O/scale_$lib build/_ab/$lib/kimi_linear_recurrent > $O/scale_$lib.log 2>&1 \
    && summ $O/scale_$lib/bench_recurrent.json "scale $lib" || tail -3 $O/scale_$lib.log
done
finish call2
