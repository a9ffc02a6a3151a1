#!/usr/bin/env bash
# Device call 3 (H200): the routed Kimi recurrent build with call 2's tune (new.tar.xz: D2 / D3 k_first on T = 1
# preload kernels) against the session's starting build (old.tar.xz): recurrent GPU tests on the new one, then D1, D2,
# D3, M1 (both layouts), alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/old /tmp/new
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/old.tar.xz -C /tmp/old && tar xJf build/_ab/new.tar.xz -C /tmp/new || exit 3
el "recurrent GPU tests (new routed build)"
KDA2_LIBRARY=/tmp/new/kimi_linear_recurrent timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -8
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s")
for x in d["rows"]:
    print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.2f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do for lib in old new; do
  el "bench round $r $lib"
  timeout 90 python3 -m kda2.bench recurrent --no-fla --library /tmp/$lib/kimi_linear_recurrent --shapes D1,D2,D3,M1 \
    --out $O/dec_${lib}_$r > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
done; done
el done
rm -f $O/dec_*/*.png
tar czf $OUT/call3.tgz -C /tmp o
