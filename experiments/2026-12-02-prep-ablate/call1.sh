#!/usr/bin/env bash
# Device call (H200): what each prep phase costs. vO: 124c82a's routed Kimi chunk library; _a<name>: the same with
# one prep phase removed (ablate.py; outputs wrong, timing only). P1-P6 softplus, kda2 alone, all alternating, two
# rounds; then ncu's durations of the prep and state kernels of vO on P1 and P3.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/abl.tar.xz -C /tmp/ab || exit 3
for r in 1 2; do for lib in vO agate ascan anorm as3 as4 as56; do
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_$lib/kimi_linear_chunk --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1 || echo "$lib rc $?"
  echo "$r $lib $(grep -E '^ P[1-6]' $O/p_${lib}_$r.log | awk '{print $1, $5}' | tr '\n' ' ')"
done; done
el "ncu"
for s in P1 P3; do
  timeout 120 ncu --kernel-name regex:"chunk_(prep|state)" --launch-count 6 --metrics gpu__time_duration.sum \
    python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_vO/kimi_linear_chunk --shapes $s --gates softplus \
    --out $O/ncu_$s > $O/ncu_$s.txt 2>&1; echo "ncu $s rc $?"
  grep -E "kda2_chunk_|gpu__time_duration" $O/ncu_$s.txt | head -12
done
el done
rm -f $O/p_*/*.png $O/ncu_*/*.png
tar czf $OUT/call.tgz -C /tmp o
