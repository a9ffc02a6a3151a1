"""Warp-stall samples of an ncu SASS source export (`ncu -i R --page source --csv --print-source sass`): the totals per
stall reason, then every instruction with at least MIN samples (index, samples, executions, top three reasons).
usage: python sass_stalls.py EXPORT.csv [MIN]
"""
import csv, sys, collections
path = sys.argv[1]; top = int(sys.argv[2]) if len(sys.argv) > 2 else 50
rows = list(csv.reader(open(path)))
hi = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
h = rows[hi]; data = [r for r in rows[hi + 1:] if len(r) == len(h)]
col = {n: i for i, n in enumerate(h)}
reasons = [n for n in h if n.startswith("stall_") and "Not Issued" not in n]
tot = collections.Counter(); S = 0; inst = 0
for r in data:
    s = int(r[col["Warp Stall Sampling (All Samples)"]] or 0); S += s
    inst += int(r[col["Instructions Executed"]] or 0)
    for n in reasons: tot[n] += int(r[col[n]] or 0)
print(f"samples {S}, warp instructions {inst}")
for n, v in tot.most_common(14): print(f"  {n:24s} {v:8d} {100*v/max(S,1):5.1f} %")
print("## listing (address, samples, executed, top stalls, sass)")
for idx, r in enumerate(data):
    s = int(r[col["Warp Stall Sampling (All Samples)"]] or 0)
    if top and s < top: continue
    st = sorted(((int(r[col[n]] or 0), n[6:]) for n in reasons), reverse=True)[:3]
    print(f"{idx:5d} {s:6d} {int(r[col['Instructions Executed']] or 0):9d}  {', '.join(f'{n} {v}' for v, n in st if v):45s} {r[col['Source']][:90]}")
