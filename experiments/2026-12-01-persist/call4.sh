#!/usr/bin/env bash
# Device call 4 (H200): latency tiles for the T=1 bucket (spec tile.latency_v_per_warp: [4]): every T=1 candidate
# forced on D1 and D2 (graph replay and kernel time, d1_sweep.py), then kda2 tune of the recurrent library.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
el sweep
timeout 240 python3 experiments/2026-12-01-persist/d1_sweep.py build/kimi_linear_recurrent/sm_90a/manifest.json \
  > $O/d1_sweep.jsonl 2> $O/d1_sweep.err; echo "sweep rc $?"; tail -3 $O/d1_sweep.err
python3 - $O/d1_sweep.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for key in sorted({(r["shape"], r["layout"]) for r in rows}):
    rs = [r for r in rows if (r["shape"], r["layout"]) == key]
    print(key, " | ".join(f"{r['id']} vpw{r['v_per_warp']}x{r['lane_cols']}w{r['warps']} {r['k_map'][:3]} "
                          f"{'P' if r['persistent'] else ''}{r['min_ctas'] or ''} g{r['graph_us']} k{r['kernel_us']}" for r in rs[:6]))
PY
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 240 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a \
  --tuning $TUN --margin 0.2 --time-limit 220 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, |Error" $O/tune.log | head -60
el done
tar czf $OUT/call4.tgz -C /tmp o
