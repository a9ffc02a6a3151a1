#!/usr/bin/env bash
# Device call (H200): what each prep phase costs. vO: 124c82a's routed Kimi chunk library; _a<name>: the same with
# one prep phase removed (ablate.py; outputs wrong, timing only). P1-P6 softplus, kda2 alone, all alternating, two
# rounds (call 2: step 5 and 6 apart).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/abl2.tar.xz -C /tmp/ab || exit 3
for r in 1 2; do for lib in vO as5d as5l as6 as56; do
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_$lib/kimi_linear_chunk --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1 || echo "$lib rc $?"
  echo "$r $lib $(grep -E '^ P[1-6]' $O/p_${lib}_$r.log | awk '{print $1, $5}' | tr '\n' ' ')"
done; done
el done
rm -f $O/p_*/*.png $O/ncu_*/*.png
tar czf $OUT/call.tgz -C /tmp o
