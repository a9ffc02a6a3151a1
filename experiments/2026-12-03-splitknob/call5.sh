#!/usr/bin/env bash
# Device call 5 (H200): the prep's off-diagonal left factors from the diagonal ones (chunk.cuh step 3: 2^(Γi−Γr) as
# 2^(Γi−Γd)·2^(Γd−Γr), one ex2 per channel instead of one per row: 4 K fewer MUFU per item at K = 128). Not the same
# bits; ran on a build with first_row_factors.patch applied (kept as the patch: call 6 could not run). 1) the chunk
# GPU tests at K = 128 (fp64 bar, no FLA), the accuracy table of HEAD's build and this one (--results-dir) to compare
# case by case. 2) kda2 bench P1-P6 softplus and the K3 set, both alternating, two rounds.
. experiments/2026-12-03-splitknob/dev.sh
el "GPU tests"
for L in old new; do
  LIB=$H; [ $L = new ] && LIB=$NEW; mkdir -p $O/acc_$L
  M=tests/gpu/test_chunk_gpu.py; [ $L = new ] && M="$M tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
  timeout 120 python3 -m pytest -m gpu $M -q --require-gpu --chunk-library $LIB --fla-cases none \
    --results-dir $O/acc_$L -rs -p no:cacheprovider > $O/gpu_$L.log 2>&1; echo "$L rc $?"; tail -1 $O/gpu_$L.log
  grep -E "^FAILED|^ERROR" $O/gpu_$L.log | head -5
done
el "bench P (softplus) and K3 (lower_bound), old / new alternating"
ab_pk3 2,4
finish call5
