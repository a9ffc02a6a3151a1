#!/usr/bin/env bash
# Device call 2 (H200): the routed builds with the split knob per dispatch row, kimi_linear_chunk routed by the record
# call 1's tune wrote (the same winners; the one-sequence rows of 8192 and 65536 confirmed at 4 and 16 segments).
# 1) chunk GPU tests at K = 128 (the split module with the row-knob test, the accuracy cases without FLA, overlap) and
# the split module at K = 64 and 256 (their rows untuned: the agents' knobs). 2) bits of unsplit calls vs HEAD's build.
# 3) kda2 bench F1-F4 (softplus, no peers), HEAD's build and this one alternating, two rounds: the row's bound gives
# the library's choice of before.
. experiments/2026-12-03-splitknob/dev.sh
el "GPU tests"
declare -A LIBS=([64]=build/small_head_chunk/sm_90a [128]=$NEW [256]=build/large_head_chunk/sm_90a)
for K in 64 128 256; do
  ( M=tests/gpu/test_chunk_split_gpu.py; [ $K = 128 ] && M="$M tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
    timeout 200 python3 -m pytest -m gpu $M -q --require-gpu --chunk-library ${LIBS[$K]} --fla-cases none -rs \
      -p no:cacheprovider > $O/gpu_k$K.log 2>&1; echo "K=$K rc $?" >> $O/rcs.txt ) &
done
wait; cat $O/rcs.txt
for K in 64 128 256; do echo "K=$K: $(tail -1 $O/gpu_k$K.log)"; grep -E "^FAILED|^ERROR" $O/gpu_k$K.log | head -5; done
el "bits"
python3 $X bits $H $O/old.pt > $O/bits.log 2>&1 && python3 $X bits $NEW $O/new.pt >> $O/bits.log 2>&1 \
  && python3 $X cmp $O/old.pt $O/new.pt >> $O/bits.log 2>&1; echo "bits rc $?"; grep -c identical $O/bits.log; rm -f $O/*.pt
el "bench F (softplus), old / new alternating"
for r in 1 2; do
  for L in old new; do
    LIB=$H; [ $L = new ] && LIB=$NEW
    timeout 60 python3 -m kda2.bench chunk --library $LIB --shapes f --gates softplus --no-fla --no-cudnn \
      --out $O/f_${L}_$r > $O/f_${L}_$r.log 2>&1 || echo "f $L $r failed"
  done
done
for f in $O/f_*_1 $O/f_*_2; do echo "== $(basename $f)"; grep -E "^\| F[0-9]" $f/bench_chunk.md | cut -d'|' -f2-5; done
finish call2
