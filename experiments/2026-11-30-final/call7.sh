#!/usr/bin/env bash
# Device call 7 (H200): the T = 1 decode kernels without per-token states (their code cost D2/D3 3-11 %, call 6):
# re-tune (their ids changed), the recurrent GPU tests (FLA on the Kimi form; intermediate states now routed to the
# multi-token bucket), and the same-run decode A/B against the tree before this session's merges.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl || exit 3
export TRITON_CACHE_DIR=/tmp/triton
TUN=$O/tuning; cp -r tuning $TUN
PYTHONPATH=$ROOT/src timeout 200 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a \
  build/small_head_recurrent/sm_90a build/kimi_linear_chunk/sm_90a --tuning $TUN --margin 0.2 --time-limit 170 \
  > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first" $O/tune.log
for r in 1 2; do
  PYTHONPATH=$ROOT/.baseline/src python3 -m kda2.bench recurrent --no-fla --library .baseline/build/kimi_linear_recurrent \
    --shapes D1,D2,D3 --out $O/old_$r > $O/old_$r.log 2>&1; echo "old $r rc $?"
  PYTHONPATH=$ROOT/src python3 -m kda2.bench recurrent --no-fla --library build/kimi_linear_recurrent \
    --shapes D1,D2,D3,M1,D2h,D3h --out $O/new_$r > $O/new_$r.log 2>&1; echo "new $r rc $?"
done
python3 - <<'PY'
import json
for r in (1, 2):
    for w in ("old", "new"):
        d = json.load(open(f"/tmp/o/{w}_{r}/bench_recurrent.json"))
        print(w, r, " ".join(f"{x['id']}/{x['layout'][0]} {x['graph_us']:.1f}us {x.get('pct_copy', 0):.0f}%" for x in d["rows"]))
PY
PYTHONPATH=$ROOT/src:/tmp/site timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --results-dir $O --fla-recurrent=kimi -k "not compute_sanitizer" -rs \
  -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent tests rc $?"; tail -3 $O/gpu_recurrent.log
tar czf $OUT/call7.tgz -C /tmp o
