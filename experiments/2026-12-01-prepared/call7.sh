#!/usr/bin/env bash
# Device call 7 (H200): programmatic dependent launches for the recurrent kernels (sm_90a). GPU tests on the kimi library, then old (main before this session) vs
# new (routes from call 4's kda2 tune), alternating, three rounds, every decode shape (D1, D2, D3, M1), both layouts.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vend/rec_new/kimi_linear_recurrent/sm_90a; OLD=build/_vend/rec_old/kimi_linear_recurrent/sm_90a
el "recurrent GPU tests"
KDA2_LIBRARY=$NEW timeout 150 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -k "not compute_sanitizer" -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -10
summ() { python3 - "$@" <<'PY'
import json, sys
path, tag = sys.argv[1:3]
d = json.load(open(path))
print(tag, " | ".join(f"{x['id']}/{x['layout'][0]} {x['ms_median'] * 1e3:.1f} g{x['graph_us']:.1f} {x.get('pct_copy', 0):.0f}%"
                     for x in d["rows"]))
PY
}
for r in 1 2 3; do for lib in old new; do
  V=$OLD; [ $lib = new ] && V=$NEW
  el "bench round $r $lib"
  timeout 120 python3 -m kda2.bench recurrent --no-fla --library $V --shapes D1,D2,D3,M1 --out $O/dec_${lib}_$r \
    > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -5 $O/dec_${lib}_$r.log; }
done; done
el done
tar czf $OUT/call7.tgz -C /tmp o
