#!/usr/bin/env bash
# Device call 8 (H200): the Kimi recurrent spec with the preload kernels' refill allowance dropped (their 4-CTA twins
# planned), the multi-token bucket on preload kernels only, rule 13 renewed: vA3.tar.xz, every candidate (sm_90a).
# GPU tests of the multi-token candidates and of every forced persistent / bulk one, kda2 tune against the repository's
# record, then the decode shapes on the routed build of call 6 (vR3) and M1 k_first with the tuned winner forced.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab/_vR3
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/vA3.tar.xz -C /tmp/ab && tar xJf build/_ab/vR3.tar.xz -C /tmp/ab/_vR3 || exit 3
NEW=/tmp/ab/_vA3/kimi_linear_recurrent
R3=/tmp/ab/_vR3/kimi_linear_recurrent
el "GPU tests (multi-token candidates, forced persistent / bulk)"
KDA2_LIBRARY=$NEW timeout 100 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py -k "multi_token or forced" \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -6
el "tune"
rm -rf /tmp/tun && cp -r tuning /tmp/tun
timeout 100 python3 -m kda2.tools.cli tune $NEW/sm_90a --tuning /tmp/tun --record $O/kimi_linear_recurrent.h200.json --margin 0.2 \
  --time-limit 90 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first:|decode-n|prefill-n" $O/tune.log | head -30
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
W=$(grep -E "^  k_first:8 +decode-n64:" $O/tune.log | awk '{print $3}')
echo "M1 k_first winner: $W"
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s")
for x in d["rows"]:
    print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do
  el "bench round $r"
  timeout 40 python3 -m kda2.bench recurrent --no-fla --library $R3 --shapes D1,D2,D3,M1 --out $O/dec_r3_$r > $O/dec_r3_$r.log 2>&1 \
    && summ $O/dec_r3_$r/bench_recurrent.json "routed $r" || { echo "bench failed"; tail -3 $O/dec_r3_$r.log; }
  [ -n "$W" ] && timeout 30 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes M1 --layouts k_first --variant $W \
    --out $O/m1_${W}_$r > $O/m1_$r.log 2>&1 && summ $O/m1_${W}_$r/bench_recurrent.json "$W $r" || { echo "bench W failed"; tail -3 $O/m1_$r.log; }
done
el done
rm -f $O/*/*.png
tar czf $OUT/call8.tgz -C /tmp o
