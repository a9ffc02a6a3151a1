#!/usr/bin/env bash
# Device call 4 (H200): the routed builds of small_head_chunk (K = 64, re-routed: call 3's tune moved its 8192 bucket's
# one-sequence class to block_v 16) and large_head_chunk (K = 256), routed by call 3's records with their split knobs:
# the chunk GPU tests at K = 64 (the split module with the row-knob test, the accuracy cases without FLA, overlap) and
# the split module at K = 256.
. experiments/2026-12-03-splitknob/dev.sh
el "GPU tests"
( timeout 240 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_gpu.py \
    tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library build/small_head_chunk/sm_90a --fla-cases none \
    -rs -p no:cacheprovider > $O/gpu_k64.log 2>&1; echo "K=64 rc $?" >> $O/rcs.txt ) &
( timeout 240 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
    --chunk-library build/large_head_chunk/sm_90a --fla-cases none -rs -p no:cacheprovider > $O/gpu_k256.log 2>&1
  echo "K=256 rc $?" >> $O/rcs.txt ) &
wait; cat $O/rcs.txt
for K in 64 256; do echo "K=$K: $(tail -1 $O/gpu_k$K.log)"; grep -E "^FAILED|^ERROR" $O/gpu_k$K.log | head -5; done
finish call4
