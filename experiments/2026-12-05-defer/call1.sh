#!/usr/bin/env bash
# Device call 1 (H200), carry ["build/_ab"], after pack.sh: the deferred decay (recurrent.cuh DEFER) in the multi-token
# k_map = all kernels. 1) the recurrent GPU tests (matrix and recurrent files: fp64 reference, the new strong- and
# zero-decay cases) on the new Kimi and K = 256 builds, at once; 2) HEAD's Kimi build against the new one, alternating,
# two rounds: M1 (N = 64, T = 4) and N = 64 / 256 at T = 2, 4, 8, both layouts (v_first's kernels are unchanged: a
# control), D2 as a second control (T = 1 kernels byte-identical).
. experiments/2026-12-02-d2pre/dev.sh
tar xJf build/_ab/defer.tar.xz || exit 3
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $O/gpu.txt
el "recurrent GPU tests (new: Kimi, K = 256)"
for s in kimi_linear_recurrent large_head_recurrent; do
  ( KDA2_LIBRARY=build/_ab/new/$s timeout 240 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
      tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_$s.log 2>&1
    echo "$s tests rc $?" >> $O/rc.txt ) &
done
wait; cat $O/rc.txt
for s in kimi_linear_recurrent large_head_recurrent; do echo "== $s: $(tail -1 $O/gpu_$s.log)"; grep -E "^FAILED|^ERROR" $O/gpu_$s.log | head -8; done
tar czf $OUT/call1.tgz -C /tmp o
bench_libs M1,D2,N64T2,N64T8,N256T4 rec new
finish call1
