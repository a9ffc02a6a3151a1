#!/usr/bin/env bash
# Device call 5 (H200): bulk preload kernels issue their state tile before the token copies (recurrent.cuh EARLY_BULK),
# on top of call 4. vB2: the Kimi recurrent spec, every candidate (sm_90a); vB: call 4's build (only the bulk preload
# kernels differ). GPU tests on vB2 (multi-token, forced candidates), tune, then M1 both layouts with the bulk preload
# routes forced from both builds, alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for b in vB vB2; do tar xJf build/_ab/$b.tar.xz -C /tmp/ab || exit 3; done
NEW=/tmp/ab/_vB2/kimi_linear_recurrent; OLD=/tmp/ab/_vB/kimi_linear_recurrent
el "GPU tests (multi-token, forced candidates)"
KDA2_LIBRARY=$NEW timeout 150 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py -k "multi_token or forced" \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -6
el "tune"
rm -rf /tmp/tun && cp -r tuning /tmp/tun
timeout 150 python3 -m kda2.tools.cli tune $NEW/sm_90a --tuning /tmp/tun --record $O/kimi_linear_recurrent.h200.json --margin 0.2 \
  --time-limit 140 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first:" $O/tune.log | head -30
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["rows"]:
    print(f"  {sys.argv[2]} {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do for lv in v_first:d5e2e307b97b k_first:76ee8257a276; do for b in OLD NEW; do
  l=${lv%%:*}; v=${lv##*:}; L=${!b}
  timeout 40 python3 -m kda2.bench recurrent --no-fla --library $L --shapes M1 --layouts $l --variant $v \
    --out $O/m1_${b}_${v}_$r > $O/m1_${b}_${v}_$r.log 2>&1 && summ $O/m1_${b}_${v}_$r/bench_recurrent.json "r$r $b $v" \
    || { echo "bench $b $v failed"; tail -3 $O/m1_${b}_${v}_$r.log; }
done; done; done
el done
rm -f $O/m1_*/*.png
tar czf $OUT/call5.tgz -C /tmp o
