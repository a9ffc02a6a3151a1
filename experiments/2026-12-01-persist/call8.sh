#!/usr/bin/env bash
# Device call 8 (H200): decode D1/D2/D3/M1 through the tuned library's own routing (tuning record of call 7:
# N=1 timed under graph replay), three rounds, L2 flushed, graph replay.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for r in 1 2 3; do
  el "round $r"
  python3 -m kda2.bench recurrent --no-fla --library build/kimi_linear_recurrent --shapes D1,D2,D3,M1 --out $O/dec_$r \
    > $O/dec_$r.log 2>&1 || { echo "decode failed"; tail -5 $O/dec_$r.log; }
  python3 - $O/dec_$r/bench_recurrent.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(f"{x['id']}/{x['layout'][0]} {x['graph_us']:.1f}us {x.get('pct_copy', 0):.1f}%" for x in d["rows"]))
PY
done
el done
tar czf $OUT/call8.tgz -C /tmp o
