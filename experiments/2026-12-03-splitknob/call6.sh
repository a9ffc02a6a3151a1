#!/usr/bin/env bash
# Device call 6 (H200), not run (no device time left): experiments/2026-12-03-splitknob/first_row_factors.patch (call 5,
# tested at K = 128) applied and built, its chunk GPU tests (fp64 bar, no FLA; the split module) on the routed
# small_head_chunk (K = 64) and large_head_chunk (K = 256) builds, their accuracy tables kept.
. experiments/2026-12-03-splitknob/dev.sh
el "GPU tests"
declare -A LIBS=([64]=build/small_head_chunk/sm_90a [256]=build/large_head_chunk/sm_90a)
for K in 64 256; do
  ( mkdir -p $O/acc_k$K
    timeout 240 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
      --chunk-library ${LIBS[$K]} --fla-cases none --results-dir $O/acc_k$K -rs -p no:cacheprovider > $O/gpu_k$K.log 2>&1
    echo "K=$K rc $?" >> $O/rcs.txt ) &
done
wait; cat $O/rcs.txt
for K in 64 256; do echo "K=$K: $(tail -1 $O/gpu_k$K.log)"; grep -E "^FAILED|^ERROR" $O/gpu_k$K.log | head -5; done
finish call6
