#!/usr/bin/env bash
# Device call 6 (H200): the routed Kimi recurrent library after call 4 (vNew: the register-floor plan and the bulk
# preload landing order: M1 v_first on d5e2e307b97b) and c913121's (vOld): GPU tests on
# vNew, then the decode shapes on both, alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for b in vNew vOld; do tar xJf build/_ab/$b.tar.xz -C /tmp/ab || exit 3; done
el "recurrent GPU tests (routed vNew)"
KDA2_LIBRARY=/tmp/ab/_vNew/kimi_linear_recurrent timeout 150 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -6
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s")
for x in d["rows"]:
    print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do for b in vNew vOld; do
  el "bench $b round $r"
  timeout 80 python3 -m kda2.bench recurrent --no-fla --library /tmp/ab/_$b/kimi_linear_recurrent --shapes D1,D2,D3,M1 \
    --out $O/dec_${b}_$r > $O/dec_${b}_$r.log 2>&1 && summ $O/dec_${b}_$r/bench_recurrent.json "$b $r" \
    || { echo "bench failed"; tail -3 $O/dec_${b}_$r.log; }
done; done
el done
tar czf $OUT/call6.tgz -C /tmp o
