#!/usr/bin/env bash
# Device call 2 (H200): the M1 routes (bucket 8: v_first d5e2e307b97b, k_first 76ee8257a276) forced at N = 64 for
# T = 1, 2, 4, 8, two rounds; the routed D2 for reference.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/r
tar xJf build/_ab/rec.tar.xz -C /tmp/r || exit 3
L=/tmp/r/build/kimi_linear_recurrent/sm_90a/manifest.json
for r in 1 2; do
  timeout 120 python3 experiments/2026-12-02-m1/tokens.py $O/t_$r $L d5e2e307b97b 76ee8257a276 > /dev/null 2>&1
  timeout 60 python3 -m kda2.bench recurrent --no-fla --library $L --shapes D2,M1 --out $O/d_$r > /dev/null 2>&1
done
python3 experiments/2026-12-02-m1/summary.py $O
rm -f $O/*/*.png; cp -r $O $OUT/
