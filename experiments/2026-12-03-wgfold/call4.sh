#!/usr/bin/env bash
# Device call 4 (H200): after call 3, the library's own split choice bounded (kda2.plan.smem: segments of >= 16
# chunks, <= 16 segments). 1) chunk GPU tests at K = 64, 128, 256: the split module (with the choice's test), and at
# K = 128 the accuracy cases (no FLA: the prep is unchanged, its bits checked in call 3) and the overlap module.
# 2) split_bench.py timings again, HEAD's vendored build vs this one. 3) kda2 bench P1-P6 softplus and the K3 set,
# both libraries alternating, two rounds each (no peers: unchanged since the peers run).
. experiments/2026-12-03-peers/dev.sh
. experiments/2026-12-03-wgfold/steps.sh
el "GPU tests"
for K in 64 128 256; do
  ( M=tests/gpu/test_chunk_split_gpu.py; [ $K = 128 ] && M="$M tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
    timeout 330 python3 -m pytest -m gpu $M -q --require-gpu --chunk-library ${NEW[$K]} --fla-cases none -rs \
      -p no:cacheprovider > $O/gpu_k$K.log 2>&1; echo "K=$K rc $?" >> $O/rcs.txt ) &
done
gpu_summary gpu_k64 gpu_k128 gpu_k256
split_choices
el "bench P (softplus) and K3 (lower_bound), old / new alternating"
for r in 1 2; do
  for L in old new; do
    LIB=$V/kimi_linear_chunk; [ $L = new ] && LIB=${NEW[128]}
    timeout 100 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus --no-fla --no-cudnn \
      --out $O/p_${L}_$r > $O/p_${L}_$r.log 2>&1 || echo "p $L $r failed"
    timeout 100 python3 -m kda2.bench chunk --library $LIB --shapes k3 --no-fla --no-cudnn \
      --out $O/k3_${L}_$r > $O/k3_${L}_$r.log 2>&1 || echo "k3 $L $r failed"
  done
done
for f in $O/p_*_1 $O/p_*_2 $O/k3_*_1 $O/k3_*_2; do echo "== $(basename $f)"; grep -E "^\| [PK][0-9]" $f/bench_chunk.md | cut -d'|' -f2-5; done
finish call4
