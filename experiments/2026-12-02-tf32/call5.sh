#!/usr/bin/env bash
# Device call 5 (H200): gs = 1c56bc8's chunk libraries (Kimi; small / large head: call 3's "new" builds); nb = gs without
# the CTA barrier between the gate step and the l2norm (each thread normalises only the q / k pieces it copied, so it
# waits for its own copies; the same bits expected). GPU tests on nb at all three head dims, same bits on Kimi, then
# P1-P6 (softplus) three rounds and the K3 set one, alternating; K = 64 / 256 P1-P6 one round each.
LIBS="gs nb"
. experiments/2026-12-02-tf32/ab3.sh
for s in small_head_chunk large_head_chunk; do
  mkdir -p /tmp/gs_$s /tmp/nb_$s && tar xJf build/_ab/new_$s.tar.xz -C /tmp/gs_$s && tar xJf build/_ab/nb_$s.tar.xz -C /tmp/nb_$s || exit 3
done
gpu_tests nb; el
for s in small_head_chunk large_head_chunk; do
  timeout 170 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library /tmp/nb_$s/build/$s/sm_90a \
    -p no:cacheprovider > $O/gpu_nb_$s.log 2>&1; echo "gpu tests nb $s rc $?: $(tail -1 $O/gpu_nb_$s.log)"; el
done
same_bits gs nb; el
bench P 3; el
bench k3 1; el
bench_head_dims gs nb
collect_gpu
cat $O/P_*.log $O/k3_*.log $O/h_*.log > $OUT/o/bench.log
