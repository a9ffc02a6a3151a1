#!/usr/bin/env bash
# Device call 1 (H200): whole-state k_first bulk tiles (BV = V, 64 KB in dynamic shared memory; the bulk tile of every
# bulk kernel now dynamic). build/_ab/vT.tar.xz: every candidate of the Kimi recurrent spec (153 kernels, plan cache in
# its .kda2/); vA.tar.xz: HEAD's routed library (baseline). GPU tests on vT (forced variants run every candidate),
# kda2 tune of vT, then the decode shapes: baseline route vs each new k_first bulk kernel forced, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for t in vA vT; do tar xJf build/_ab/$t.tar.xz -C /tmp/ab || exit 3; done
OLD=/tmp/ab/_vA/kimi_linear_recurrent
NEW=/tmp/ab/_vT/kimi_linear_recurrent
el "recurrent GPU tests (every candidate)"
KDA2_LIBRARY=$NEW timeout 240 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR|SKIPPED" $O/gpu_recurrent.log | head -12
el "tune"
timeout 200 python3 -m kda2.tools.cli tune $NEW/sm_90a --tuning /tmp/tun --record $O/kimi_linear_recurrent.h200.json --margin 0.2 \
  --time-limit 180 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first" $O/tune.log
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s")
for x in d["rows"]:
    print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do for v in base c93fea57e128 d95331a1af56 257cbf3ad7a1; do
  el "bench round $r $v"
  if [ $v = base ]; then
    timeout 60 python3 -m kda2.bench recurrent --no-fla --library $OLD --shapes D1,D2,D3 --out $O/dec_${v}_$r > $O/dec_${v}_$r.log 2>&1
  else
    timeout 60 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes D1,D2,D3 --variant $v --out $O/dec_${v}_$r > $O/dec_${v}_$r.log 2>&1
  fi && summ $O/dec_${v}_$r/bench_recurrent.json "$v $r" || { echo "bench $v failed"; tail -3 $O/dec_${v}_$r.log; }
done; done
el done
rm -f $O/dec_*/*.png
tar czf $OUT/call1.tgz -C /tmp o
