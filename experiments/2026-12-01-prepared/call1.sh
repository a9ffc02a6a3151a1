#!/usr/bin/env bash
# Device call 1 (H200): multi-token decode with the prepared-token table (recurrent.cuh prepare_tokens): the
# recurrent GPU tests on the new kimi library (every multi-token candidate by index, fp64 reference), then the
# decode benchmark old (main: per-warp token prep, tuned routes) vs new (untuned k_first:8 route; v_first:8 still
# routes to the same variant id 8682bfa201af, so that pair is the same kernel config before/after), alternating,
# three rounds, then kda2 tune of the new library (records written under $O/tuning).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vend/rec_new/kimi_linear_recurrent/sm_90a; OLD=build/_vend/rec_old/kimi_linear_recurrent/sm_90a
el "recurrent GPU tests (new library)"
KDA2_LIBRARY=$NEW timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -k "not compute_sanitizer" -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "recurrent tests rc $?"; tail -2 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -20
summ() { python3 - "$@" <<'PY'
import json, sys
path, tag = sys.argv[1:3]
d = json.load(open(path))
print(tag, " | ".join(f"{x['id']}/{x['layout']} {x['ms_median'] * 1e3:.1f}us g{x['graph_us']:.1f} {x.get('pct_copy', 0):.0f}%"
                     for x in d["rows"]))
PY
}
for r in 1 2 3; do for lib in old new; do
  V=$OLD; [ $lib = new ] && V=$NEW
  el "bench round $r $lib"
  timeout 100 python3 -m kda2.bench recurrent --no-fla --library $V --shapes M1,D2 --out $O/dec_${lib}_$r \
    > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -5 $O/dec_${lib}_$r.log; }
done; done
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 240 python3 -m kda2.tools.cli tune $NEW --tuning $TUN --margin 0.2 --time-limit 220 > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first|wrote|candidates, |rror" $O/tune.log | head -40
el done
tar czf $OUT/call1.tgz -C /tmp o
