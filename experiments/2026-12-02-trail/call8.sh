#!/usr/bin/env bash
# Device call 8 (H200): the small-head (K = V = 64) and large-head (K = V = 256) chunk libraries with the state pass as
# the prep's programmatic dependent (HEAD): their chunk GPU tests (fp64 bar, split, overlap; FLA not needed).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/h
tar xJf build/_ab/heads.tar.xz -C /tmp/h || exit 3
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
for s in small_head_chunk large_head_chunk; do
  timeout 200 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library /tmp/h/build/$s/sm_90a -rs \
    -p no:cacheprovider > $O/gpu_$s.log 2>&1; echo "$s gpu tests rc $?"; tail -1 $O/gpu_$s.log
  grep -E "^FAILED|^ERROR" $O/gpu_$s.log | head -4
done
cp -r $O $OUT/
