"""One line per row of every bench_recurrent.json under a directory: id, layout, T, µs, % of the 1 GiB copy, % of an
equal-size copy (or the error). usage: python summary.py DIR"""
import json
import sys
from pathlib import Path

for f in sorted(Path(sys.argv[1]).rglob("bench_recurrent.json")):
    r = json.loads(f.read_text())
    if r.get("error"):
        print(f.parent.name, "ERROR", r["error"][:300])
    for row in r.get("rows", []):
        if "error" in row:
            print(f.parent.name, row["id"], row["layout"], "ERROR", row["error"][:200])
            continue
        print(f.parent.name, row["id"], row["layout"], f"T={row['T']}", f"{row['ms_median'] * 1000:.1f} us",
              f"{row['pct_copy']:.1f} % of copy", f"{row.get('pct_copy_same') or 0:.1f} % of equal-size")
