#!/usr/bin/env bash
# Device call A (H200): `kda2 tune` of the default recurrent and chunk specs at every batch class (issue 11:
# per-class dispatch rows); decode A/B vs the tree before the issue-13 merges (.baseline) after the branch-free
# gate-parameter load; then the recurrent GPU tests (FLA's Triton JIT runs last, so it overlaps no timing).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl || exit 3
export TRITON_CACHE_DIR=/tmp/triton
el tune; TUN=$O/tuning; cp -r tuning $TUN
PYTHONPATH=$ROOT/src timeout 240 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a \
  build/small_head_recurrent/sm_90a build/large_head_recurrent/sm_90a build/kimi_linear_chunk/sm_90a \
  --tuning $TUN --margin 0.2 --time-limit 220 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, " $O/tune.log
el "decode A/B"
for r in 1 2; do for w in base new; do
  case $w in base) P=$ROOT/.baseline/src; L=.baseline/build;; new) P=$ROOT/src; L=build;; esac
  PYTHONPATH=$P python3 -m kda2.bench recurrent --no-fla --library $L/kimi_linear_recurrent --shapes D1,D2,D3 \
    --out $O/${w}_$r > $O/${w}_$r.log 2>&1 || { echo "$w failed"; tail -3 $O/${w}_$r.log; continue; }
  python3 -c "
import json; d=json.load(open('$O/${w}_$r/bench_recurrent.json'))
print('$w $r', ' '.join(f\"{x['id']}/{x['layout'][0]} {x['graph_us']:.1f}us {x['pct_copy']:.0f}%\" for x in d['rows']))"
done; done
el "recurrent GPU tests"
PYTHONPATH=$ROOT/src:/tmp/site timeout 230 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --results-dir $O --fla-recurrent=kimi -k "not compute_sanitizer" \
  -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent tests rc $?"; tail -3 $O/gpu_recurrent.log
el done
tar czf $OUT/callA.tgz -C /tmp o
