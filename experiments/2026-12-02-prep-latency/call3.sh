#!/usr/bin/env bash
# Device call (H200): EXPERIMENT — the prep asks L2 for the tiles of the item its SM takes a wave later
# (build/_ab/vPF.tar.xz, prefetch_item_l2.patch on chunk.cuh, reverted) against the routed Kimi chunk library without it (vC): same bits on six cases (same_bits.py),
# then P1-P6 softplus, kda2 alone, alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for t in vC vPF; do tar xJf build/_ab/$t.tar.xz -C /tmp/ab || exit 3; done
X=experiments/2026-12-01-prep2/same_bits.py
python3 $X run /tmp/ab/_vC/kimi_linear_chunk $O/a.pt && \
  python3 $X run /tmp/ab/_vPF/kimi_linear_chunk $O/b.pt && python3 $X cmp $O/a.pt $O/b.pt > $O/same_bits.log 2>&1
echo "same-bits rc $?"; tail -3 $O/same_bits.log; rm -f $O/*.pt
for r in 1 2; do for lib in vC vPF; do
  el "bench round $r $lib"
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_$lib/kimi_linear_chunk --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1; echo "rc $?"
  grep -E "^ P[1-6]" $O/p_${lib}_$r.log | head -6 || tail -5 $O/p_${lib}_$r.log
done; done
el done
rm -f $O/p_*/*.png
tar czf $OUT/call3.tgz -C /tmp o
