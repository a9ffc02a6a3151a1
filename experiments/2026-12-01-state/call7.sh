#!/usr/bin/env bash
# Device call 7 (H200): the overlap on the faster state pass. Per shape, the single-stage wgmma variants plain and
# overlapped (same bits) against the routed (two-stage) plain launch (experiments/2026-12-01-prep3/overlap.py on call
# 4's build): does a state CTA beside the prep now beat the routed launch on the long shapes?
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
LIB=build/_vend3/kimi_linear_chunk/kimi_linear_chunk/sm_90a
sed -e 's/^VARIANTS = .*/VARIANTS = ["56fabf5e08b5", "c5c729e14c2d"]/' experiments/2026-12-01-prep3/overlap.py > $O/overlap.py
PYTHONPATH=$ROOT/src timeout 200 python3 $O/overlap.py $LIB $O/overlap.json > $O/overlap.log 2>&1; echo "overlap.py rc $?"
grep -v Warning $O/overlap.log | python3 -c "
import json,sys
for l in sys.stdin:
    try: r=json.loads(l)
    except Exception: continue
    print(r['shape'], r['variant'], 'same' if r['same_bits'] else 'DIFF', 'finite' if r['finite'] else 'NONFINITE', r.get('ref_err_on', ''), f\"{r['ms_off']:.3f} -> {r['ms_on']:.3f}\")" | tee $O/overlap_summary.txt
cp $O/overlap.json $O/overlap_summary.txt $O/overlap.log $OUT/
