#!/usr/bin/env bash
# Device call 7 (H200): kda2 tune with the decode buckets timed in place through a state pool (as serving and the
# benchmark run them; call 4 timed h0 -> ht between two buffers, where a bulk-staged kernel won N = 64 that it loses
# in place, call 6). Every candidate at each batch class in one run.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vendN/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 300 python3 -m kda2.tools.cli tune $NEW --tuning $TUN --margin 0.2 --time-limit 280 --force > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first:[18] |wrote|candidates, |rror" $O/tune.log | head -40
python3 - $TUN/kimi_linear_recurrent.h200.json $NEW/manifest.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); names = {v["id"]: v.get("name", v["id"]) for v in json.load(open(sys.argv[2]))["variants"]}
for rk in ("k_first:1", "v_first:1", "k_first:8", "v_first:8"):
    c = d["routes"][rk]["candidates"]
    for kind in ("direct", "bulk"):
        best = sorted((v["classes"].get("decode-n64", 1e9), h) for h, v in c.items() if ("_bulk_" in names.get(h, "")) == (kind == "bulk"))[:2]
        print(rk, kind, [(names.get(h, h).split("k128v128_")[-1], c[h]["classes"]) for _, h in best])
PY
el done
tar czf $OUT/call7.tgz -C /tmp o
