#!/usr/bin/env bash
# Device call 2 (H200): (1) the L2 prefetch compiled into one-token kernels only and run by grids of at most two
# CTAs per SM (build/_ab/vC.tar.xz): recurrent GPU tests, decode shapes against call 1's baseline (vA), alternating,
# two rounds; (2) kda2 tune of the same spec planned with max_candidates 14 (build/_ab/vX.tar.xz: the narrower
# k_map = all tiles, 32 state registers a lane, that the cap of 8 left out of the multi-token bucket), record to $O.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for t in vA vC vX; do tar xJf build/_ab/$t.tar.xz -C /tmp/ab || exit 3; done
OLD=/tmp/ab/_vA/kimi_linear_recurrent
NEW=/tmp/ab/_vC/kimi_linear_recurrent
EXP=/tmp/ab/_vX/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a
el "recurrent GPU tests (new)"
KDA2_LIBRARY=$NEW timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
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
el "tune (max_candidates 14)"
mkdir -p /tmp/ab/_vX/kimi_linear_recurrent/.kda2 && cp build/_ab/plan-cache-x.json /tmp/ab/_vX/kimi_linear_recurrent/.kda2/plan-cache.json
timeout 300 python3 -m kda2.tools.cli tune $EXP --tuning /tmp/tun --record $O/tune_x.json --margin 0.2 --time-limit 280 --force \
  > $O/tune_x.log 2>&1; echo "tune rc $?"; grep -E "route|->|routed|k_first:8|v_first:8" $O/tune_x.log | tail -20
el done
rm -f $O/dec_*/*.png
tar czf $OUT/call2.tgz -C /tmp o
