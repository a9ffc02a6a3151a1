#!/usr/bin/env bash
# Device call 6 (H200): same-run A/B of decode D1-D3 (no FLA): the tree before this session's merges (.baseline:
# 4ed4737, its runtime and its recurrent build) against this tree's build, alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
for r in 1 2; do
  PYTHONPATH=$ROOT/.baseline/src python3 -m kda2.bench recurrent --no-fla --library .baseline/build/kimi_linear_recurrent \
    --shapes D1,D2,D3 --out $O/old_$r > $O/old_$r.log 2>&1; echo "old $r rc $?"
  PYTHONPATH=$ROOT/src python3 -m kda2.bench recurrent --no-fla --library build/kimi_linear_recurrent \
    --shapes D1,D2,D3 --out $O/new_$r > $O/new_$r.log 2>&1; echo "new $r rc $?"
done
python3 - <<'PY'
import json
for r in (1, 2):
    for w in ("old", "new"):
        d = json.load(open(f"/tmp/o/{w}_{r}/bench_recurrent.json"))
        print(w, r, " ".join(f"{x['id']}/{x['layout'][0]} {x['ms_median']*1000:.1f}us {x.get('pct_copy', 0):.0f}%" for x in d["rows"] if x.get("impl", "kda2") == "kda2"))
PY
tar czf $OUT/call6.tgz -C /tmp o
