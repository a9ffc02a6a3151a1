#!/usr/bin/env bash
# Device call 9 (H200): issue 11's same-run table — tuned dispatch vs the agents' untuned first choice, alternating,
# three rounds: chunk P1-P6 (softplus) and decode D2 (N = 64) k_first, through each library's own routing.
# Libraries: vendored bundles (kda2 vendor) of build/ (routed by tuning/) and build_untuned/ (no tuning records).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
summ() { python3 - "$@" <<'PY'
import json, sys
kind, path, tag = sys.argv[1:4]
d = json.load(open(path))
if kind == "chunk":
    print(tag, " ".join(f"{r['id']} {r['kda2']['ms_median']:.3f}" for r in d['rows']))
else:
    print(tag, " ".join(f"{x['id']}/{x['layout']} event {x['ms_median'] * 1e3:.1f}us graph {x['graph_us']:.1f}us "
                        f"{x.get('pct_copy', 0):.0f}%" for x in d["rows"]))
PY
}
for r in 1 2 3; do for lib in untuned tuned; do
  V=build/_vend/$lib
  el "round $r $lib"
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $V/kimi_linear_chunk/sm_90a --shapes p \
    --gates softplus --iters 10 --out $O/chunk_${lib}_$r > $O/chunk_${lib}_$r.log 2>&1 \
    && summ chunk $O/chunk_${lib}_$r/bench_chunk.json "chunk $lib $r" || { echo "chunk $lib failed"; tail -3 $O/chunk_${lib}_$r.log; }
  timeout 100 python3 -m kda2.bench recurrent --no-fla --library $V/kimi_linear_recurrent/sm_90a --layouts k_first \
    --shapes D2 --out $O/dec_${lib}_$r > $O/dec_${lib}_$r.log 2>&1 \
    && summ dec $O/dec_${lib}_$r/bench_recurrent.json "dec $lib $r" || { echo "decode $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
done; done
el done
tar czf $OUT/call9.tgz -C /tmp o
