#!/usr/bin/env bash
# Device call 2 (H200): step 4 of the prep without its entry barrier (each warp starts it after its own step 3;
# β k 2^Γ over v, β v over q after the barrier) on top of call 1's three load groups. vO: c011523's routed chunk
# libraries; vG1: + the load groups (4dda859); vG2: + step 4. Same bits vs vO on six cases per head dim, then P1-P6
# softplus, kda2 alone, the three alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/libs.tar.xz -C /tmp/ab || exit 3
X=experiments/2026-12-01-prep2/same_bits.py
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  python3 $X run /tmp/ab/_vO/$s $O/a.pt > /dev/null && python3 $X run /tmp/ab/_vG2/$s $O/b.pt > /dev/null && \
    python3 $X cmp $O/a.pt $O/b.pt > $O/same_bits_$s.log 2>&1
  echo "$s same-bits rc $?"; grep -c identical $O/same_bits_$s.log; grep -v identical $O/same_bits_$s.log | head -3; rm -f $O/*.pt
done
for r in 1 2; do for lib in vO vG1 vG2; do
  el "bench round $r $lib"
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_$lib/kimi_linear_chunk --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1; echo "rc $?"
  grep -E "^ P[1-6]" $O/p_${lib}_$r.log | head -6 || tail -5 $O/p_${lib}_$r.log
done; done
el done
rm -f $O/p_*/*.png
tar czf $OUT/call2.tgz -C /tmp o
