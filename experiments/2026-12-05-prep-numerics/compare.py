"""The model's prediction against a GPU run: python3 compare.py CHUNK-ACCURACY.json [VARIANT] (default bfs-mixed).

Per case, the o / final-state error the H200 measured (the last session in the file) next to emulate.py's for the
same case and seed (variants.json), and their ratio; a model that holds gives ratios near 1 (today's kernel:
0.992-1.004 for o)."""
import json
import sys
from pathlib import Path

measured = json.loads(Path(sys.argv[1]).read_text())["sessions"][-1]["rows"]
variant = sys.argv[2] if len(sys.argv) > 2 else "bfs-mixed"
model = {r["case"]: r for r in json.loads((Path(__file__).parent / "variants.json").read_text())["rows"]}
print(f"| case | measured o | model o ({variant}) | ratio | measured state | model state | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
ratios = []
for m in measured:
    p = model.get(m["case"])
    if p is None or p["seed"] != m["seed"] or variant not in p:
        continue
    po, ps = p[variant]["o"], p[variant]["state"]
    ro = m["ours_o"] / po
    rs = m["ours_state"] / ps if m["ours_state"] is not None and ps else None
    ratios.append(ro)
    print(f"| {m['case']} | {m['ours_o']:.3e} | {po:.3e} | {ro:.3f} | "
          + (f"{m['ours_state']:.3e} | {ps:.3e} | {rs:.3f} |" if rs is not None else "– | – | – |"))
if ratios:
    print(f"\no ratio over {len(ratios)} cases: {min(ratios):.3f}-{max(ratios):.3f}")
