#!/usr/bin/env bash
# Device call 6 (H200): the overlapped wgmma state pass reads the next slot's ready flag a step early (chunk.cuh
# peek_ready: a relaxed read issued among the step's MMAs) instead of acquiring it at the step's top behind a CTA
# barrier. old = HEAD's routed Kimi chunk library, new = with the early read. Overlap / split / chunk GPU tests on new;
# same bits; P1-P6 softplus alternating, three rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/old /tmp/new
tar xJf build/_ab/chunk_head.tar.xz -C /tmp/old && tar xJf build/_ab/chunk_peek.tar.xz -C /tmp/new || exit 3
OLD=/tmp/old/build/kimi_linear_chunk/sm_90a; NEW=/tmp/new/build/kimi_linear_chunk/sm_90a
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
timeout 150 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library $NEW -rs -p no:cacheprovider \
  > $O/gpu_new.log 2>&1; echo "gpu tests rc $?"; tail -1 $O/gpu_new.log; grep -E "^FAILED|^ERROR" $O/gpu_new.log | head -6
S=experiments/2026-12-01-prep2/same_bits.py
timeout 60 python3 $S run $OLD $O/old.pt > /dev/null 2>&1 && timeout 60 python3 $S run $NEW $O/new.pt > /dev/null 2>&1 \
  && python3 $S cmp $O/old.pt $O/new.pt 2>&1 | grep -c identical
el bench
row() { grep -E '^ (P[1-6]|K[0-9]+)' $1 | awk '{print $1, $5}' | tr '\n' ' '; }
for r in 1 2 3; do for lib in old new; do
  L=/tmp/$lib/build/kimi_linear_chunk/sm_90a
  timeout 45 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
    --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1 || echo "rc $?"
  echo "P $r $lib: $(row $O/p_${lib}_$r.log)"
done; done
el done
rm -f $O/*/*.png $O/*.pt; cp -r $O $OUT/
