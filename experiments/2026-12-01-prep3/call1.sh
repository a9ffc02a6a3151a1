#!/usr/bin/env bash
# Device call 1 (H200): the prep's loads with hoisted row pointers and compile-time gate pieces, Γ read in
# 16-byte pieces in step 4, and step 6 balanced over the warps on a 16-bit copy of T (ldmatrix). None of them
# changes an operation on a value or the order of a sum, so o and ht must equal main's bit for bit
# (same_bits.py) on all three chunk specs; then the chunk GPU tests (fp64 reference) of each spec, and main /
# this build alternating on P1-P6 with both gates.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
X=experiments/2026-12-01-prep2/same_bits.py
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "same bits $s"
  OLD=build/_vendA/$s/$s/sm_90a; NEW=build/_vendC/$s/$s/sm_90a
  python3 $X run $OLD $O/old.pt && python3 $X run $NEW $O/new.pt && python3 $X cmp $O/old.pt $O/new.pt > $O/same_bits_$s.log 2>&1
  echo "same-bits $s rc $?"; grep -c identical $O/same_bits_$s.log; grep DIFF $O/same_bits_$s.log | head -3
  rm -f $O/*.pt
done
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "GPU tests $s"
  timeout 170 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
    --chunk-library build/_vendC/$s/$s/sm_90a --fla-cases=none -rs -p no:cacheprovider > $O/gpu_$s.log 2>&1
  echo "$s rc $?"; tail -1 $O/gpu_$s.log
done
for round in 1 2; do
  for v in old new; do
    el "bench $v $round"; L=build/_vendA/kimi_linear_chunk/kimi_linear_chunk/sm_90a
    [ $v = new ] && L=build/_vendC/kimi_linear_chunk/kimi_linear_chunk/sm_90a
    timeout 150 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes p --gates softplus,lower_bound \
      --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "rc $?"
  done
done
el done
python3 experiments/2026-12-01-prep3/ab.py $O old new | tee $O/ab.txt
rm -f $O/b_*/*.png
tar czf $OUT/call1.tgz -C /tmp o
