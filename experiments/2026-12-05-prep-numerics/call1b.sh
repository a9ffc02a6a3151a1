#!/usr/bin/env bash
# Device call 1, step 3 (call1a.sh says what the call is): the A/B, `kda2 bench chunk` on the K = 128 levels and bfs
# libraries (the same untuned planner routes, the knob alone differs), P1-P6 both gates and K1-K10, alternating lev,
# bfs per round (ROUNDS, default "1 2"; the folder is kept, so a later round's table takes the medians of all).
# Everything under $OUT/prep1b.tgz (saved as it goes).
O=/tmp/ob; TGZ=prep1b.tgz; . experiments/2026-12-05-prep-numerics/setup.sh   # kept across rounds
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
