#!/usr/bin/env bash
# Device call 2 (H200): the Kimi recurrent spec planned with the occupancy agent's register floor (model.registers_floor,
# headroom 8): every candidate (sm_90a, vAll.tar.xz). GPU tests with every candidate forced, then kda2 tune against the
# repository's record; M1 v_first with the old route and the new winner forced, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/vAll.tar.xz -C /tmp/ab || exit 3
NEW=/tmp/ab/_vAll/kimi_linear_recurrent
el "recurrent GPU tests (every candidate forced)"
KDA2_LIBRARY=$NEW timeout 260 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -6
el "tune"
rm -rf /tmp/tun && cp -r tuning /tmp/tun
timeout 200 python3 -m kda2.tools.cli tune $NEW/sm_90a --tuning /tmp/tun --record $O/kimi_linear_recurrent.h200.json --margin 0.2 \
  --time-limit 180 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first:" $O/tune.log | head -30
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
W=$(grep -E "^  v_first:8 +decode-n64:" $O/tune.log | awk '{print $3}')
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["rows"]:
    print(f"  {sys.argv[2]} {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do for v in 8682bfa201af $W; do
  timeout 40 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes M1 --layouts v_first --variant $v \
    --out $O/m1_${v}_$r > $O/m1_${v}_$r.log 2>&1 && summ $O/m1_${v}_$r/bench_recurrent.json "r$r $v" \
    || { echo "bench $v failed"; tail -3 $O/m1_${v}_$r.log; }
done; done
el done
rm -f $O/m1_*/*.png
tar czf $OUT/call2.tgz -C /tmp o
