#!/usr/bin/env bash
# Device call 4 (H200): v_first / strided bulk preload kernels land the state tile after the entry block's token
# table is prepared (recurrent.cuh, as the k_map = all body does), so that its waits overlap the tile's flight.
# vB: the Kimi recurrent spec, every candidate (sm_90a), with that change (only the bulk preload kernels' code differs).
# GPU tests (multi-token, forced candidates), tune, then M1 v_first with the route (cfb19c46e076, direct) and the bulk
# preload kernels forced, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/vB.tar.xz -C /tmp/ab || exit 3
NEW=/tmp/ab/_vB/kimi_linear_recurrent
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
for r in 1 2; do for v in cfb19c46e076 d5e2e307b97b 32e26fdc84a3; do
  timeout 40 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes M1 --layouts v_first --variant $v \
    --out $O/m1_${v}_$r > $O/m1_${v}_$r.log 2>&1 && summ $O/m1_${v}_$r/bench_recurrent.json "r$r $v" \
    || { echo "bench $v failed"; tail -3 $O/m1_${v}_$r.log; }
done; done
el done
rm -f $O/m1_*/*.png
tar czf $OUT/call4.tgz -C /tmp o
