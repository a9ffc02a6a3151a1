#!/usr/bin/env bash
# Device call 20: the prep's tiles by tensor copies (the plan's prep_tma: sm_90, K = 64 and 128; K = 256 keeps
# cp.async), the working tree's three chunk specs vendored to build/_ab/n_<spec>: bits against HEAD's builds at
# K = 64, 128, 256, the chunk GPU tests at each (with the overlap module: the overlapped prep copies the same way),
# then HEAD and the new K = 128 build alternating, three rounds (pipes/call3.sh). Carry build/_ab.
for s in small_head_chunk kimi_linear_chunk large_head_chunk; do
  mkdir -p build/$s; rm -rf build/$s/sm_90a; ln -s "$PWD/build/_ab/n_$s/$s/sm_90a" build/$s/sm_90a
done
GPU_TESTS="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py" \
  NEW_LABEL="tensor-copied tiles" CALL=${CALL:-call20} bash experiments/2026-12-03-pipes/call3.sh
