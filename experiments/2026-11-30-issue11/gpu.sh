#!/usr/bin/env bash
# Issue 11 on the H200 (one device call, < 10 min): measure a hardware profile, then tune the default specs of
# both families on this GPU. Run from the repo root with build/ present (scons on the build host) and $OUT set.
# Writes to $OUT: profiles/h200-measured.yaml, tuning/ (records, failures, any partial record), logs.
# The committed records (tuning/) are copied first, so incumbents and resumption work; nothing in the tree is
# overwritten except profiles/h200-measured.yaml.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; OUT=${OUT:-$ROOT/out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then   # the project's usual extra wheels (FLA etc.), as in scripts/gpu_check.sh
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=$ROOT/src:/tmp/site
# calibrate needs only cuda-python + numpy; tune reads each library's profile and budget from the build's plan
# cache (build/.kda2/plan-cache.json, carry it with build/), so neither needs pydantic/PyYAML here
test -f build/.kda2/plan-cache.json || echo "gpu.sh: warning: no build/.kda2/plan-cache.json: tune will need pydantic + pyyaml"
kda2() { python3 -m kda2.tools.cli "$@"; }
nvidia-smi -L
T0=$(date +%s)

echo "== calibrate"
timeout 150 kda2 calibrate --out profiles/h200-measured.yaml; echo "calibrate rc $?"
mkdir -p "$OUT/profiles"; cp profiles/h200-measured.yaml "$OUT/profiles/" 2>/dev/null && cat profiles/h200-measured.yaml

echo "== dry run (model estimates and prunes from the built resources)"
TUN=$OUT/tuning; rm -rf "$TUN"; cp -r tuning "$TUN"
LIBS="build/kimi_linear_recurrent/sm_90a build/small_head_recurrent/sm_90a build/kimi_linear_chunk/sm_90a"
kda2 tune --dry-run $LIBS --tuning "$TUN" > "$OUT/tune_dry_run.txt" 2>&1; echo "dry run rc $?"

echo "== tune (both families; a time limit or a kernel fault stops it keeping a .partial.json: resumed below)"
for attempt in 1 2 3; do
  LEFT=$(( 480 - ($(date +%s) - T0) )); [ $LEFT -gt 30 ] || break
  timeout $((LEFT + 30)) python3 -m kda2.tools.cli tune $LIBS --tuning "$TUN" --quick --time-limit $LEFT \
    2>&1 | tee -a "$OUT/tune.log"
  rc=${PIPESTATUS[0]}; echo "tune attempt $attempt rc $rc"
  [ $rc -eq 3 ] || break   # 3: stopped early (time limit, or a fault lost the CUDA context): resume
done

echo "== results"
python3 - "$TUN" <<'PY' | tee "$OUT/summary.md"
import json, sys
from pathlib import Path
from kda2.plan.model import spearman_of_record
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    r = json.loads(f.read_text())
    if r.get("schema") != 2:
        continue
    print(f"## {f.name}: {r.get('gpu')} {r.get('date')}")
    rho = spearman_of_record(r)
    for key, row in sorted(r["routes"].items()):
        c = row["candidates"][row["variant"]]
        print(f"- {key}: {row['variant']} {c.get('us')} us (model {c.get('model_us')}), Spearman {rho.get(key)}")
    for key in r.get("unrouted", {}):
        print(f"- {key}: NO candidate passed (see failures)")
for f in sorted((Path(sys.argv[1]) / "failures").glob("*.jsonl")):
    for line in f.read_text().splitlines():
        d = json.loads(line)
        print(f"failure {f.name}:{d['id']} {d['kind']} {d['route']} {d['variant']} {d['knobs']} {d['detail']}")
PY
git diff --no-index --stat tuning "$TUN" || true
echo "elapsed $(( $(date +%s) - T0 )) s"
