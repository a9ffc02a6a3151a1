#!/usr/bin/env bash
# Device call 9 (H200): batched tokens in the k_map=all preload kernels (recurrent.cuh all_k tokens: one reduction
# round per block of up to 4 tokens, closed-form state update). Recurrent GPU tests on the new kimi library (every
# multi-token candidate by index: T 2/4/8/13, varlen, per-token states), then M1/D2 previous (call 7's library:
# prepared table + PDL, token by token) vs new, alternating, three rounds, then kda2 tune of the new library.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vend/rec_wy/kimi_linear_recurrent/sm_90a; PREV=build/_vend/rec_new/kimi_linear_recurrent/sm_90a
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
for r in 1 2 3; do for lib in prev new; do
  V=$PREV; [ $lib = new ] && V=$NEW
  el "bench round $r $lib"
  timeout 100 python3 -m kda2.bench recurrent --no-fla --library $V --shapes M1,D2 --out $O/dec_${lib}_$r \
    > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -5 $O/dec_${lib}_$r.log; }
done; done
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 200 python3 -m kda2.tools.cli tune $NEW --tuning $TUN --margin 0.2 --time-limit 180 > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first:[18] |wrote|candidates, |rror" $O/tune.log | head -30
el done
tar czf $OUT/call9.tgz -C /tmp o
