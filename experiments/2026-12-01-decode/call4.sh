#!/usr/bin/env bash
# Device call 4 (H200): the bulk-staged kernels land the state where it is first needed (after the first token's
# input loads are issued) instead of at once. kda2 tune (every candidate at each batch class, one run), then the
# forced-variant GPU tests (fp64 reference) on every bulk / persistent variant and every multi-token candidate.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vendR/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a
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
el "GPU tests: forced decode variants, every multi-token candidate"
KDA2_LIBRARY=$NEW timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py -q --require-gpu \
  --fla-recurrent=none -k "forced or every_multi_token" -rs -p no:cacheprovider > $O/gpu_forced.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_forced.log; grep -E "^FAILED|^ERROR|Error" $O/gpu_forced.log | head -10
el done
tar czf $OUT/call4.tgz -C /tmp o
