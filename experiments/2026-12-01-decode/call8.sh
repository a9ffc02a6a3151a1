#!/usr/bin/env bash
# Device call 8 (H200): the final recurrent library (routes from call 7: decode timed in place; bulk-staged v_first
# routed at N = 256 only). Every recurrent GPU test (fp64 reference, sanitizers with every bulk variant forced), then
# the decode shapes twice, copies in the same process (the README decode table).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vendN/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a
el "recurrent GPU tests"
KDA2_LIBRARY=$NEW timeout 330 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR|^SKIPPED" $O/gpu_recurrent.log | head -12
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s")
for x in d["rows"]:
    print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.1f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do
  el "bench round $r"
  timeout 100 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes D1,D2,D3,M1 --out $O/dec_$r \
    > $O/dec_$r.log 2>&1 && summ $O/dec_$r/bench_recurrent.json "round $r" || { echo "bench failed"; tail -5 $O/dec_$r.log; }
done
el done
tar czf $OUT/call8.tgz -C /tmp o
