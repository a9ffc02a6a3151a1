#!/usr/bin/env bash
# Device call 5 (H200): the split choice with segments of >= 32 chunks (after call 4's K8 loss at 16). FLA's Triton
# kernels warmed for the benchmark's few-chain set F1-F4 (softplus) while the split modules run at K = 64, 128, 256
# (with the choice's test); then split_bench.py timings (HEAD's vendored build vs this one) and `kda2 bench chunk
# --shapes f` with FLA and cuDNN on this build, and without peers on HEAD's vendored build.
. experiments/2026-12-03-peers/dev.sh
. experiments/2026-12-03-wgfold/steps.sh
el "FLA warm (F1-F4 softplus) beside the split modules"
( timeout 330 python3 -m kda2.bench.fla_warm --jobs 4 --only f --gates softplus > $O/warm.log 2>&1; echo "warm rc $?" >> $O/rcs.txt ) &
for K in 64 128 256; do
  ( timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py -q --require-gpu --chunk-library ${NEW[$K]} \
      --fla-cases none -rs -p no:cacheprovider > $O/split_k$K.log 2>&1; echo "K=$K rc $?" >> $O/rcs.txt ) &
done
gpu_summary split_k64 split_k128 split_k256; tail -1 $O/warm.log
split_choices
el "bench f (softplus): this build with FLA and cuDNN, HEAD's build alone"
timeout 200 python3 -m kda2.bench chunk --library ${NEW[128]} --shapes f --gates softplus --out $O/f_new > $O/f_new.log 2>&1
echo "f new rc $?"; grep -E "^\| F" $O/f_new/bench_chunk.md
timeout 100 python3 -m kda2.bench chunk --library $V/kimi_linear_chunk --shapes f --gates softplus --no-fla --no-cudnn \
  --out $O/f_old > $O/f_old.log 2>&1; echo "f old rc $?"; grep -E "^\| F" $O/f_old/bench_chunk.md
finish call5
