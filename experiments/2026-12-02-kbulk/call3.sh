#!/usr/bin/env bash
# Device call 3 (H200): the routed Kimi recurrent build after the re-tune (build/_ab/vR2.tar.xz: k_first decode at
# N = 256 and the multi-token bucket on tensor-map bulk kernels) against HEAD's routed library (vA): recurrent GPU
# tests on the new build, then the decode shapes, alternating, two rounds (the README table).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for t in vA vR2; do tar xJf build/_ab/$t.tar.xz -C /tmp/ab || exit 3; done
OLD=/tmp/ab/_vA/kimi_linear_recurrent
NEW=/tmp/ab/_vR2/kimi_linear_recurrent
el "recurrent GPU tests (routed build)"
KDA2_LIBRARY=$NEW timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR|SKIPPED" $O/gpu_recurrent.log | head -12
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
tar czf $OUT/call3.tgz -C /tmp o
