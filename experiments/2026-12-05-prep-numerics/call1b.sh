#!/usr/bin/env bash
# Device call 1 (H200), carry ["build/_ab/vbfs.tar.xz"]: the prep_wu bfs variants on a GPU for the first time.
#   1. tests/gpu/test_wgmma_gpu.py: the blocked substitution alone (tests/kernels/bfs_check.cu, kda2/bfs.cuh bfs_solve)
#      against its rounding model and an fp64 solve; if it fails, nothing after it means anything.
#   2. the chunk GPU tests (36 cases, fp64 reference, FLA compared on none) on the bfs libraries of K = 64, 128, 256,
#      their accuracy tables to compare with the model's prediction (NOTES.md, variants.json: bfs-mixed).
#   3. the A/B: `kda2 bench chunk` on the K = 128 levels and bfs libraries (the same untuned planner routes, the knob
#      alone differs), P1-P6 both gates and K1-K10, alternating lev, bfs, lev, bfs on the same warm GPU.
# Everything under $OUT/prep1b.tgz (saved as it goes).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/ob; mkdir -p $O   # kept across rounds (call1c.sh runs one round a call)
tar xJf build/_ab/vbfs.tar.xz -C /tmp || exit 3
save() { tar czf "$OUT/prep1b.tgz" -C /tmp ob 2>/dev/null; }
run() {  # name, timeout, pytest args...
  local n=$1 t=$2; shift 2
  mkdir -p $O/$n
  timeout "$t" python3 -m pytest -m gpu -q --require-gpu -rs -p no:cacheprovider --results-dir $O/$n "$@" \
    > $O/$n.log 2>&1
  echo "$n rc $?" >> $O/rc.txt
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee $O/gpu.txt
el "3. A/B, K = 128: levels vs bfs, alternating"
for round in ${ROUNDS:-1 2}; do
  for kind in lev bfs; do
    timeout 150 python3 -m kda2.tools.cli bench chunk --library /tmp/vbfs/kimi_${kind}_chunk/sm_90a/manifest.json \
      --shapes p,k3 --no-fla --no-cudnn --out $O/bench_${kind}_$round > $O/bench_${kind}_$round.log 2>&1
    echo "bench $kind $round rc $?" >> $O/rc.txt; save
  done
done
cat $O/rc.txt
python3 - <<'EOF'
import json, statistics
rows = {}
for kind in ("lev", "bfs"):
    for r in (1, 2):
        try:
            d = json.load(open(f"/tmp/ob/bench_{kind}_{r}/bench_chunk.json"))
        except (OSError, ValueError) as e:
            print(kind, r, "no results:", e); continue
        for row in d.get("rows", []):
            key = (row["id"], row["gate"])
            ms = (row.get("kda2") or {}).get("ms_median")
            if ms: rows.setdefault(key, {}).setdefault(kind, []).append(ms)
print("| shape | gate | levels ms | bfs ms | bfs / levels |")
print("|---|---|---:|---:|---:|")
for key, v in rows.items():
    if "lev" in v and "bfs" in v:
        a, b = statistics.median(v["lev"]), statistics.median(v["bfs"])
        print(f"| {key[0]} | {key[1]} | {a:.3f} | {b:.3f} | {b / a:.3f} |")
EOF
el done
save
