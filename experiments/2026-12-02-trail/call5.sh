#!/usr/bin/env bash
# Device call 5 (H200): the state pass launched as the prep's programmatic dependent (plain unsplit launches, sm_90:
# library.cpp.j2; chunk.cuh Kernels::prep signals at entry, Kernels::state waits for the prep grid's completion
# before it reads anything), so its CTAs are resident when the prep ends. old = HEAD's routed Kimi chunk library,
# new = that change. Chunk GPU tests on new; same bits old vs new; P1-P6 softplus and the K3 set (bounded),
# alternating; P1-P6 with overlap refused on new.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/old /tmp/new
tar xJf build/_ab/chunk_old.tar.xz -C /tmp/old && tar xJf build/_ab/chunk_new.tar.xz -C /tmp/new || exit 3
OLD=/tmp/old/build/kimi_linear_chunk/sm_90a; NEW=/tmp/new/build/kimi_linear_chunk/sm_90a
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
timeout 150 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library $NEW -rs -p no:cacheprovider \
  > $O/gpu_new.log 2>&1; echo "gpu tests rc $?"; tail -1 $O/gpu_new.log; grep -E "^FAILED|^ERROR" $O/gpu_new.log | head -6
el same-bits
S=experiments/2026-12-01-prep2/same_bits.py
timeout 60 python3 $S run $OLD $O/old.pt > /dev/null 2>&1 && timeout 60 python3 $S run $NEW $O/new.pt > /dev/null 2>&1 \
  && python3 $S cmp $O/old.pt $O/new.pt 2>&1 | tail -8
el bench
row() { grep -E '^ (P[1-6]|K[0-9]+)' $1 | awk '{print $1, $2, $5}' | tr '\n' ' '; }
for r in 1 2 3; do for lib in old new; do
  L=/tmp/$lib/build/kimi_linear_chunk/sm_90a
  timeout 45 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
    --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1 || echo "rc $?"
  echo "P $r $lib: $(row $O/p_${lib}_$r.log)"
done; done
for r in 1 2; do for lib in old new; do
  L=/tmp/$lib/build/kimi_linear_chunk/sm_90a
  timeout 45 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes k3 --out $O/k_${lib}_$r \
    > $O/k_${lib}_$r.log 2>&1 || echo "rc $?"
  echo "K3 $r $lib: $(row $O/k_${lib}_$r.log)"
done; done
timeout 45 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $NEW --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
  --overlap off --out $O/p_plain > $O/p_plain.log 2>&1; echo "P new, overlap off: $(row $O/p_plain.log)"
el done
rm -f $O/*/*.png; cp -r $O $OUT/
