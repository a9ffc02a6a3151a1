#!/usr/bin/env bash
# Device call 5 (H200): tuned vs untuned dispatch through the libraries' own routing, same run, alternating
# (issue 11: P1-P6 softplus and decode D1/D2/D3/M1 with today's tuning records: occupancy, preload, the new
# prep; PART=A decode (the two recurrent libraries fill the 64 MiB carry), PART=B chunk); then FLA's JIT for the benchmark's option sets and chunk P1-P6 vs FLA 0.6 (no timing of ours after
# the warm-up processes: they ran to completion first).
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
  if [ "${PART:-A}" = B ] && [ $r -le 2 ]; then
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $d/kimi_linear_chunk --shapes p --gates softplus \
    --out $O/chunk_${lib}_$r > $O/chunk_${lib}_$r.log 2>&1 && summ chunk $O/chunk_${lib}_$r/bench_chunk.json "chunk $lib $r" \
    || { echo "chunk $lib failed"; tail -5 $O/chunk_${lib}_$r.log; }
  fi
  if [ "${PART:-A}" = A ]; then
  python3 -m kda2.bench recurrent --no-fla --library $d/kimi_linear_recurrent --shapes D1,D2,D3,M1 --out $O/dec_${lib}_$r \
    > $O/dec_${lib}_$r.log 2>&1 && summ dec $O/dec_${lib}_$r/bench_recurrent.json "dec $lib $r" \
    || { echo "decode $lib failed"; tail -5 $O/dec_${lib}_$r.log; }
  fi
done; done
[ "${PART:-A}" = B ] || { el done; tar czf $OUT/call5.tgz -C /tmp o; exit 0; }
el "FLA warm (benchmark option sets), then chunk P1-P6 vs FLA 0.6 on the tuned build"
PYTHONPATH=$ROOT/src:/tmp/site timeout 240 python3 -m kda2.bench.fla_warm --only bench > $O/fla_warm.log 2>&1
echo "fla warm rc $?"; tail -1 $O/fla_warm.log
PYTHONPATH=$ROOT/src:/tmp/site timeout 150 python3 -m kda2.bench chunk --no-cudnn --library build/kimi_linear_chunk \
  --shapes p --gates softplus,lower_bound --out $O/chunk_fla > $O/chunk_fla.log 2>&1; echo "chunk vs FLA rc $?"
PYTHONPATH=$ROOT/src python3 -m kda2.bench readme-table $O/chunk_fla/bench_chunk.json 2>&1 | head -20
el done
tar czf $OUT/call5.tgz -C /tmp o
