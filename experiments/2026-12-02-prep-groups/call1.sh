#!/usr/bin/env bash
# Device call 1 (H200): the prep kernel's loads in three commit groups (the raw gate, then q and k, then v), each step
# waiting only for the group it reads (chunk.cuh step 1), against the routed chunk libraries without it (c011523).
# vG*: this tree's builds of kimi_linear_chunk (K=128), small_head_chunk (64), large_head_chunk (256); vO*: the old ones.
# Same bits on six cases per head dim (same_bits.py), the chunk GPU tests on the new K=128 library (fp64 bar only:
# --fla-cases none; same bits carry FLA's comparison over), then P1-P6 softplus, kda2 alone, alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/libs.tar.xz -C /tmp/ab || exit 3
X=experiments/2026-12-01-prep2/same_bits.py
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  python3 $X run /tmp/ab/_vO/$s $O/a.pt > /dev/null && python3 $X run /tmp/ab/_vG/$s $O/b.pt > /dev/null && \
    python3 $X cmp $O/a.pt $O/b.pt > $O/same_bits_$s.log 2>&1
  echo "$s same-bits rc $?"; tail -2 $O/same_bits_$s.log; rm -f $O/*.pt
done
el "chunk GPU tests (new K=128, fp64 bar)"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --fla-cases none \
  --chunk-library /tmp/ab/_vG/kimi_linear_chunk -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_chunk.log; grep -E "^FAILED|^ERROR" $O/gpu_chunk.log | head -6
for r in 1 2; do for lib in vO vG; do
  el "bench round $r $lib"
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_$lib/kimi_linear_chunk --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1; echo "rc $?"
  grep -E "^ P[1-6]" $O/p_${lib}_$r.log | head -6 || tail -5 $O/p_${lib}_$r.log
done; done
el done
rm -f $O/p_*/*.png
tar czf $OUT/call1.tgz -C /tmp o
