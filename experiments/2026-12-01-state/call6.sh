#!/usr/bin/env bash
# Device call 6 (H200): the prep prefetches into L2 (cp.async.bulk.prefetch) the inputs of the CTA about one
# GPU-full later in the launch's order while it waits for its own. No arithmetic changes: every variant's o and ht
# must equal main's bits (kimi_linear_chunk, plain and overlapped); chunk GPU tests on the three chunk specs; call 4's
# build (same tuning record) / this build alternating on P1-P6, both gates.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
X=experiments/2026-12-01-state/same_bits_variants.py
MAIN=build/_vend1/kimi_linear_chunk/kimi_linear_chunk/sm_90a; OLD=build/_vend3/kimi_linear_chunk/kimi_linear_chunk/sm_90a
NEW=build/_vend5/kimi_linear_chunk/kimi_linear_chunk/sm_90a
el "same bits kimi_linear_chunk, every variant"
python3 $X run $MAIN $O/old.pt > $O/sb_run_old.log 2>&1 && python3 $X run $NEW $O/new.pt > $O/sb_run_new.log 2>&1 \
  && python3 $X cmp $O/old.pt $O/new.pt > $O/same_bits.log 2>&1
echo "same-bits rc $?"; grep -c identical $O/same_bits.log; grep -E "DIFF|MISSING" $O/same_bits.log | head -5; tail -1 $O/same_bits.log
rm -f $O/*.pt
for round in 1 2; do
  for v in old new; do
    el "bench $v $round"; L=$OLD; [ $v = new ] && L=$NEW
    timeout 150 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes p --gates softplus,lower_bound \
      --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "rc $?"
  done
done
python3 experiments/2026-12-01-prep3/ab.py $O old new | tee $O/ab.txt
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "GPU tests $s"
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py \
    tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library build/_vend5/$s/$s/sm_90a --fla-cases=none \
    -rs -p no:cacheprovider > $O/gpu_$s.log 2>&1
  echo "$s rc $?"; tail -1 $O/gpu_$s.log
done
el done
rm -f $O/b_*/*.png
tar czf $OUT/call6.tgz -C /tmp o
