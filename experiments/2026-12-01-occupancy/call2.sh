#!/usr/bin/env bash
# Device call 2 (H200): tuned vs untuned dispatch through the libraries' own routing, same run, alternating
# (issue 11: P1-P6 softplus and decode D1/D2/D3/M1 after the occupancy agent); then the GPU tests: recurrent
# (the new launch-bounds variants) and chunk (fp16 inputs, issue 13). FLA's Triton JIT runs last: no timing after it.
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
for r in 1 2 3; do for lib in untuned tuned; do
  d=build; [ $lib = untuned ] && d=build_untuned
  el "round $r $lib"
  if [ $r -le 2 ]; then
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $d/kimi_linear_chunk --shapes p --gates softplus \
    --out $O/chunk_${lib}_$r > $O/chunk_${lib}_$r.log 2>&1 && summ chunk $O/chunk_${lib}_$r/bench_chunk.json "chunk $lib $r" \
    || { echo "chunk $lib failed"; tail -5 $O/chunk_${lib}_$r.log; }
  fi
  python3 -m kda2.bench recurrent --no-fla --library $d/kimi_linear_recurrent --shapes D1,D2,D3,M1 --out $O/dec_${lib}_$r \
    > $O/dec_${lib}_$r.log 2>&1 && summ dec $O/dec_${lib}_$r/bench_recurrent.json "dec $lib $r" \
    || { echo "decode $lib failed"; tail -5 $O/dec_${lib}_$r.log; }
done; done
el "GPU tests (FLA's Triton JIT for the chunk cases warms in parallel processes meanwhile)"
PYTHONPATH=$ROOT/src:/tmp/site python3 -m kda2.bench.fla_warm --only cases > $O/fla_warm.log 2>&1 &
WARM=$!
PYTHONPATH=$ROOT/src:/tmp/site timeout ${REC_TIMEOUT:-200} python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=kimi -k "not compute_sanitizer" -rs \
  -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent tests rc $?"; tail -2 $O/gpu_recurrent.log
wait $WARM; echo "fla warm rc $?"; tail -2 $O/fla_warm.log
el "chunk tests"
PYTHONPATH=$ROOT/src:/tmp/site timeout ${CHUNK_TIMEOUT:-200} python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py \
  tests/gpu/test_chunk_split_gpu.py -q --require-gpu --chunk-library build/kimi_linear_chunk/sm_90a \
  --results-dir $O/acc -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1; echo "chunk tests rc $?"; tail -2 $O/gpu_chunk.log
el done
tar czf $OUT/call2.tgz -C /tmp o
