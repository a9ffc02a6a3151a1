#!/usr/bin/env bash
# Device call 6 (H200): the README decode table. vR3.tar.xz: the routed Kimi recurrent library after call 5's re-tune
# (gate on the SFU, rules 0009 -> 0013); vH.tar.xz: fb88d30's routed library. GPU tests on vR3, then the decode
# shapes alternating fb88d30 / new in one process each, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab/_vH /tmp/ab/_vR3
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for t in vH vR3; do tar xJf build/_ab/$t.tar.xz -C /tmp/ab/_$t || exit 3; done
OLD=/tmp/ab/_vH/kimi_linear_recurrent
NEW=/tmp/ab/_vR3/kimi_linear_recurrent
el "recurrent GPU tests (new routed build)"
KDA2_LIBRARY=$NEW timeout 220 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -12
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s")
for x in d["rows"]:
    print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do for lib in old new; do
  V=$OLD; [ $lib = new ] && V=$NEW
  el "bench round $r $lib"
  timeout 80 python3 -m kda2.bench recurrent --no-fla --library $V --shapes D1,D2,D3,M1 --out $O/dec_${lib}_$r \
    > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
done; done
el done
rm -f $O/dec_*/*.png
tar czf $OUT/call6.tgz -C /tmp o
