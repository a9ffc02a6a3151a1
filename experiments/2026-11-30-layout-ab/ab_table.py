"""Same-run A/B table: kernels of the previous tree (old) vs this tree (new), medians of two alternating rounds."""
import json, statistics, sys
from pathlib import Path
root = Path(sys.argv[1])
def rows(kind, who, r):
    p = root / f"{who}_{kind}_{r}" / ("bench_chunk.json" if kind == "chunk" else "bench_recurrent.json")
    d = json.loads(p.read_text())
    out = {}
    for row in d["rows"]:
        if kind == "chunk":
            if row.get("kda2") and row["kda2"].get("ms_median"): out[(row["id"], row["gate"], row["layout"])] = row["kda2"]["ms_median"]
        elif row["impl"] == "kda2":
            out[(row["id"], row["layout"], "")] = row["ms_median"]
    return out
print("| family | shape | gate/layout | before ms (r1, r2) | after ms (r1, r2) | after/before |")
print("|---|---|---|---:|---:|---:|")
worst = 0
for kind in ("chunk", "rec"):
    o = [rows(kind, "old", r) for r in (1, 2)]; n = [rows(kind, "new", r) for r in (1, 2)]
    for k in o[0]:
        ob = statistics.median([x[k] for x in o]); nb = statistics.median([x[k] for x in n])
        ratio = nb / ob; worst = max(worst, abs(ratio - 1))
        print(f"| {kind} | {k[0]} | {' '.join(x for x in k[1:] if x)} | {o[0][k]:.4f}, {o[1][k]:.4f} | {n[0][k]:.4f}, {n[1][k]:.4f} | {ratio:.3f} |")
print(f"worst |after/before - 1| = {worst:.3f}")
