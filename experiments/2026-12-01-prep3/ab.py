"""Median-of-medians A/B table from `kda2.bench chunk` runs saved as DIR/b_<variant>_<round>/bench_chunk.json.

usage: python ab.py DIR BASE VARIANT [VARIANT ...]  (ratios of each variant against BASE, per shape and gate)
"""
import glob
import json
import statistics
import sys

o, base, *variants = sys.argv[1:]
t = {}
for f in sorted(glob.glob(f"{o}/b_*_*/bench_chunk.json")):
    v = f.split("/")[-2].split("_")[1]
    for r in json.load(open(f))["rows"]:
        t.setdefault((r["id"], r["gate"]), {}).setdefault(v, []).append(r["kda2"]["ms_median"])
print("| shape | gate | " + " | ".join(f"{v} ms" for v in [base, *variants]) + " | "
      + " | ".join(f"{v}/{base}" for v in variants) + " |")
for (i, g), d in t.items():
    m = {k: statistics.median(x) for k, x in d.items()}
    print(f"| {i} | {g} | " + " | ".join(f"{m[v]:.3f}" for v in [base, *variants]) + " | "
          + " | ".join(f"{m[v] / m[base]:.3f}" for v in variants) + " |")
