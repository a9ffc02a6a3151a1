"""Per variant of an emulate.py JSON: worst o / state error, mean and range of the ratio to today's, and how close
today's model is to the H200's measured errors (calibration). Usage: python3 summarize.py FILE.json [...]"""
import json
import sys

import numpy as np

for path in sys.argv[1:]:
    d = json.load(open(path))
    rows, variants = d["rows"], d["variants"]
    print(f"## {path}  ({len(rows)} cases, seed {d['seed']}{', round ' + d['round'] if d.get('round') else ''})")
    print("| variant | worst o (finite cases) | worst state | o / today's model: mean (min–max) | all finite |")
    print("|---|---:|---:|---|---|")
    for v in variants:
        eo = [r[v]["o"] for r in rows if r[v]["finite"]]
        es = [r[v]["state"] for r in rows if r[v]["state"] is not None and r[v]["finite"]]
        rat = [r[v]["o"] / r["today"]["o"] for r in rows if r[v]["finite"] and r["today"]["finite"]] if "today" in variants else []
        rr = f"{np.mean(rat):.3f} ({min(rat):.3f}–{max(rat):.3f})" if rat else "–"
        print(f"| {v} | {max(eo):.3e} | {max(es):.3e} | {rr} | {'yes' if all(r[v]['finite'] for r in rows) else 'no: ' + ', '.join(r['case'] for r in rows if not r[v]['finite'])} |")
    cal = [(r["today"]["o"] / r["h200_o"], (r["today"]["state"] / r["h200_state"]) if r.get("h200_state") else None)
           for r in rows if "h200_o" in r and "today" in r]
    if cal and not d.get("round"):
        co = [a for a, _ in cal]
        cs = [b for _, b in cal if b is not None]
        print(f"\ncalibration (today's model / H200 measured, {len(cal)} cases): o {min(co):.4f}–{max(co):.4f}, "
              f"state {min(cs):.4f}–{max(cs):.4f}\n")
    print()
