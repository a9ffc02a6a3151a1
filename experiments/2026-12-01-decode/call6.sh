#!/usr/bin/env bash
# Device call 6 (H200): the bulk kernels with the mbarrier initialised behind a barrier before it is armed (call 5's
# racecheck reported the init / arm pair of thread 0 as 20 hazard warnings). compute-sanitizer memcheck and
# racecheck (every bulk variant forced) and the forced-variant tests; then a same-run A/B on the v_first decode
# shapes: the routed bulk variant (2674d2450fe7) against the routes it replaced (8d9e7f1da746 at N = 64,
# de14854d2ae4 at N = 256), forced by `kda2 bench recurrent --variant`, alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vendN/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a
el "GPU tests: sanitizer, forced variants"
KDA2_LIBRARY=$NEW timeout 300 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -k "sanitizer or forced" -rs -p no:cacheprovider > $O/gpu_sanitizer.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_sanitizer.log; grep -E "^FAILED|^ERROR|SUMMARY" $O/gpu_sanitizer.log | head -12
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s", d.get("forced_variants", "routed"))
for x in d["rows"]:
    print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.1f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do
  for v in routed 8d9e7f1da746 de14854d2ae4; do
    F=""; [ $v != routed ] && F="--variant $v"
    el "bench round $r $v"
    timeout 80 python3 -m kda2.bench recurrent --no-fla --library $NEW --layouts v_first --shapes D2,D3 $F \
      --out $O/ab_${v}_$r > $O/ab_${v}_$r.log 2>&1 && summ $O/ab_${v}_$r/bench_recurrent.json "$v $r" \
      || { echo "bench failed"; tail -3 $O/ab_${v}_$r.log; }
  done
done
el done
tar czf $OUT/call6.tgz -C /tmp o
