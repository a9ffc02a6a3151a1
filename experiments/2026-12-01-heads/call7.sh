#!/usr/bin/env bash
# Device call 7 (H200): the chunk library with the wgmma state candidates (state_mma: wgmma, sm_90a) through
# kda2 tune: every candidate checked against the fp64 reference (GVA, two sequences, a partial chunk, h0/ht in
# the variant's layout) and timed at every batch class, mma_sync and wgmma in the same run.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
TUN=$O/tuning; cp -r tuning $TUN
timeout 300 python3 -m kda2.tools.cli tune build/kimi_linear_chunk/sm_90a --tuning $TUN --margin 0.2 \
  --time-limit 280 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, |rror|failure" $O/tune.log | head -40
python3 - <<'PY'
import json
d = json.load(open("/tmp/o/tuning/kimi_linear_chunk.h200.json"))
for route, r in sorted(d["routes"].items()):
    for vid, c in sorted(r["candidates"].items()):
        print(route, vid, c.get("error"), c.get("classes"), c.get("pruned") or "")
PY
tar czf $OUT/call7.tgz -C /tmp o
