#!/usr/bin/env bash
# Device call 3 (H200): the session's landed prep (149e400: tf32 operands by one add, the gate step's folded scale,
# left-out diagonal channels anchored at r) against its start (34754d8). Kimi: GPU tests with the fp64 accuracy
# table on both (head, gs), then P1-P6 (softplus, two rounds) and the K3 set (one), alternating. Small-head (K = 64)
# and large-head (K = 256): GPU tests on the new build, P1-P6 at that head dim old vs new (one round).
LIBS="head gs"
. experiments/2026-12-02-tf32/ab3.sh
for s in small_head_chunk large_head_chunk; do for w in old new; do
  mkdir -p /tmp/${w}_$s && tar xJf build/_ab/${w}_$s.tar.xz -C /tmp/${w}_$s || exit 3; done; done
for n in head gs; do
  timeout 170 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library $(lib $n) -p no:cacheprovider \
    --results-dir $O/acc_$n > $O/gpu_$n.log 2>&1; echo "gpu tests $n rc $?: $(tail -1 $O/gpu_$n.log)"; el
done
for s in small_head_chunk large_head_chunk; do
  L=/tmp/new_$s/build/$s/sm_90a
  timeout 170 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library $L -p no:cacheprovider \
    --results-dir $O/acc_$s > $O/gpu_$s.log 2>&1; echo "gpu tests $s rc $?: $(tail -1 $O/gpu_$s.log)"; el
done
bench P 2; el
bench k3 1; el
bench_head_dims old new
collect_gpu
for d in $O/acc_*; do echo "== $d"; cat $d/*.md 2>/dev/null; done > $OUT/o/accuracy.md
cat $O/P_*.log $O/k3_*.log $O/h_*.log > $OUT/o/bench.log
