"""Where a fused16 call's time goes, from ncu's source page (`ncu -i REP --page source --csv --print-source cuda,sass`,
gzipped): warp-instructions and stall samples per step between the CTA's barriers (its phases), and the source lines
with the most instructions, samples or shared-memory wavefronts.

usage: python ncu_phases.py P3_CUDASASS.csv.gz STEPS HEADER   (STEPS: CTA-steps in the profiled call, e.g. P3's
256 chains × 128 = 32768; HEADER: the fused.cuh the profiled kernel was compiled from, for the line texts)
"""
from __future__ import annotations

import csv
import gzip
import re
import sys

path, steps, header = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = list(csv.reader(gzip.open(path, "rt")))
src = open(header).read().splitlines()

sass, lines, hdr, cur = {}, {}, None, None
for r in rows:
    if not r:
        continue
    if r[0] == "File Path":
        cur = r[1].rsplit("/", 1)[-1]
    elif r[0] == "Line No":
        hdr = r
    elif len(r) > 8 and r[0] == "" and r[2].startswith("0x"):   # a SASS row (listed once per source file)
        sass[int(r[2], 16)] = (r[3].strip(), int(r[4]), int(r[7]))
    elif cur and hdr and r[0].isdigit():
        try:
            s, e = int(r[4]), int(r[7])
            wf = int(r[hdr.index("L1 Wavefronts Shared")])
        except ValueError:
            continue
        acc = lines.setdefault((cur, int(r[0])), [0, 0, 0, r[1].strip()])
        acc[0] += s
        acc[1] += e
        acc[2] += wf

ts = sum(v[1] for v in sass.values())
te = sum(v[2] for v in sass.values())
seg, cur_seg = [], [0, 0, 0]
for _, (text, s, e) in sorted(sass.items()):
    cur_seg[0] += s
    cur_seg[1] += e
    cur_seg[2] += 1
    if re.search(r"BAR\.SYNC(\.DEFER_BLOCKING)? 0x0$", text):   # a CTA-wide barrier ends a phase
        seg.append(cur_seg)
        cur_seg = [0, 0, 0]
seg.append(cur_seg)
print(f"warp instructions a step {te / steps:.0f}; phases (between CTA barriers):")
for i, (s, e, n) in enumerate(seg):
    print(f"  {i}: samples {100 * s / ts:5.1f} %  instructions a step {e / steps:6.0f} ({100 * e / te:4.1f} %)  "
          f"SASS {n}")
for key, title in ((1, "instructions"), (0, "stall samples"), (2, "shared wavefronts")):
    print(f"top lines by {title} (a step):")
    for (f, ln), v in sorted(lines.items(), key=lambda x: -x[1][key])[:15]:
        text = src[ln - 1].strip() if f == "fused.cuh" else v[3]
        print(f"  {f[:12]:12s}{ln:5d} {v[key] / (1 if key == 0 else steps):9.0f}  {text[:90]}")
