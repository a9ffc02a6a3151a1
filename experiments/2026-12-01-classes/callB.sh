#!/usr/bin/env bash
# Device call B (H200): tuned vs untuned dispatch, same run, alternating, two rounds (issue 11: P1-P6 softplus
# and decode D1/D2/M1 through the libraries' own routing); decode A/B vs .baseline with the gate-parameter body
# compiled per dtype (issue 13); then the GPU tests of both families (FLA's Triton JIT last: no timing after it).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export TRITON_CACHE_DIR=/tmp/triton
summ() { python3 - "$@" <<'PY'
import json, sys
kind, path, tag = sys.argv[1:4]
d = json.load(open(path))
if kind == "chunk":
    print(tag, " ".join(f"{r['id']} {r['kda2']['ms_median']:.3f}" for r in d['rows']))
else:
    print(tag, " ".join(f"{x['id']}/{x['layout'][0]} {x['graph_us']:.1f}us {x.get('pct_copy', 0):.0f}%" for x in d["rows"]))
PY
}
for r in 1 2; do for lib in untuned tuned; do
  d=build; [ $lib = untuned ] && d=build_untuned
  el "round $r $lib"
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $d/kimi_linear_chunk --shapes p --gates softplus \
    --out $O/chunk_${lib}_$r > $O/chunk_${lib}_$r.log 2>&1 && summ chunk $O/chunk_${lib}_$r/bench_chunk.json "chunk $lib $r" \
    || { echo "chunk $lib failed"; tail -5 $O/chunk_${lib}_$r.log; }
  python3 -m kda2.bench recurrent --no-fla --library $d/kimi_linear_recurrent --shapes D1,D2,M1 --out $O/dec_${lib}_$r \
    > $O/dec_${lib}_$r.log 2>&1 && summ dec $O/dec_${lib}_$r/bench_recurrent.json "dec $lib $r" \
    || { echo "decode $lib failed"; tail -5 $O/dec_${lib}_$r.log; }
done; done
el "decode A/B vs .baseline"
for r in 1 2; do for w in base new; do
  case $w in base) P=$ROOT/.baseline/src; L=.baseline/build;; new) P=$ROOT/src; L=build;; esac
  PYTHONPATH=$P python3 -m kda2.bench recurrent --no-fla --library $L/kimi_linear_recurrent --shapes D1,D2,D3 \
    --out $O/${w}_$r > $O/${w}_$r.log 2>&1 && summ dec $O/${w}_$r/bench_recurrent.json "$w $r" || echo "$w failed"
done; done
el "GPU tests"
PYTHONPATH=$ROOT/src:/tmp/site timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=kimi -k "not compute_sanitizer" -rs \
  -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent tests rc $?"; tail -2 $O/gpu_recurrent.log
PYTHONPATH=$ROOT/src:/tmp/site timeout 280 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py \
  tests/gpu/test_chunk_split_gpu.py -q --require-gpu --results-dir $O -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1
echo "chunk tests rc $?"; tail -2 $O/gpu_chunk.log
el done
tar czf $OUT/callB.tgz -C /tmp o
