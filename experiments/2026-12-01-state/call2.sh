#!/usr/bin/env bash
# Device call 2 (H200): the state pass's loop rewritten (descriptors by one add, o staged by stmatrix.trans, v_new
# formed while O's products run, one barrier less per chunk with two stages). Same operations in the same order:
# every variant's o and ht must equal main's bits, plain and overlapped (same_bits_variants.py); the chunk GPU tests
# (fp64 reference; graph replay of the overlap included) on kimi_linear_chunk and small_head_chunk (K = 64, whose
# state variants are all mma_sync); main / this build alternating on P1-P6, both gates; the per-kernel split on P1-P6 (ncu).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
X=experiments/2026-12-01-state/same_bits_variants.py
OLD=build/_vend1/kimi_linear_chunk/kimi_linear_chunk/sm_90a; NEW=build/_vend2/kimi_linear_chunk/kimi_linear_chunk/sm_90a
SMALL=build/_vend2/small_head_chunk/small_head_chunk/sm_90a
el "same bits kimi_linear_chunk, every variant"
python3 $X run $OLD $O/old.pt > $O/sb_run_old.log 2>&1 && python3 $X run $NEW $O/new.pt > $O/sb_run_new.log 2>&1 \
  && python3 $X cmp $O/old.pt $O/new.pt > $O/same_bits.log 2>&1
echo "same-bits rc $?"; grep -c identical $O/same_bits.log; grep -E "DIFF|MISSING" $O/same_bits.log | head -5; tail -1 $O/same_bits.log
tail -3 $O/sb_run_new.log; rm -f $O/*.pt
for L in $NEW $SMALL; do
  s=$(basename $(dirname $L))
  el "GPU tests $s"
  timeout 240 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py \
    tests/gpu/test_chunk_overlap_gpu.py -q -s --require-gpu --chunk-library $L --fla-cases=none -rs -p no:cacheprovider \
    > $O/gpu_$s.log 2>&1
  echo "$s rc $?"; grep -c "graph replays overlapped" $O/gpu_$s.log; grep -c "graph replays plain" $O/gpu_$s.log; tail -1 $O/gpu_$s.log
done
for round in 1 2; do
  for v in old new; do
    el "bench $v $round"; L=$OLD; [ $v = new ] && L=$NEW
    timeout 150 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes p --gates softplus,lower_bound \
      --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "rc $?"
  done
done
python3 experiments/2026-12-01-prep3/ab.py $O old new | tee $O/ab.txt
el "ncu split new"
timeout 200 ncu --kernel-name regex:kda2_chunk --metrics gpu__time_duration.sum,launch__grid_size \
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $NEW --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
  --iters 1 --warmup 0 --out $O/dur > $O/ncu_dur.txt 2>&1; echo "ncu rc $?"
grep -E "kda2_chunk|gpu__time_duration" $O/ncu_dur.txt | paste - - | awk '{print $1, $(NF)}' | head -30
el done
rm -f $O/b_*/*.png
tar czf $OUT/call2.tgz -C /tmp o
