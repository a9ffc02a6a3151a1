"""Digest the PREPTRACE lines of a trace build (trace_prep.py): per warp, the mean cycle at each mark relative to the
CTA's first entry, and per barrier the mean wait of each warp (the barrier's exit minus the warp's arrival).
usage: python trace_report.py LOG [LOG ...]"""
import collections
import sys

MARKS = ["entry", "gate landed", "gate bar", "q/k landed", "l2norm bar", "s3 loops", "s3 exch", "s4 done",
         "s4 bar", "lvl1 bar", "T16 bar", "s6 staged", "s6 bar", "end"]
MID_MARKS = MARKS[:6] + ["s3 synced", "s3 pre-exact"] + MARKS[6:]
# (arrival mark, exit mark) of the CTA barriers the trace brackets
BARRIERS = {"gate": (1, 2), "Γ + l2norm": (3, 4), "end of step 4": (7, 8), "step 6 staging": (11, 12)}

ctas = collections.defaultdict(dict)
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        if line.startswith("PREPTRACE"):
            f = line.split()
            x, hv, w = int(f[1]), int(f[2]), int(f[3])
            t = [int(v) for v in f[4:]]
            # a --mid trace's marks 14, 15 (exchange synced, before the exact path) go between 5 and 6
            ctas[(path, x, hv)][w] = t[:6] + t[14:16] + t[6:14] if len(t) == 16 else t
ctas = {k: v for k, v in ctas.items() if len(v) == 8}
if ctas and len(next(iter(next(iter(ctas.values())).values()))) == len(MID_MARKS):
    MARKS = MID_MARKS
    BARRIERS = {name: (a + 2 * (a > 5), b + 2 * (b > 5)) for name, (a, b) in BARRIERS.items()}
if not ctas:
    sys.exit("no complete CTA traces (8 warps each) in " + " ".join(sys.argv[1:]))
rel = collections.defaultdict(lambda: [0.0] * len(MARKS))
for warps in ctas.values():
    t0 = min(t[0] for t in warps.values())
    for w, t in warps.items():
        for i, v in enumerate(t):
            rel[w][i] += (v - t0) / len(ctas)
print(f"{len(ctas)} CTAs; mean cycles since the CTA's first entry")
print("| warp | " + " | ".join(MARKS) + " |")
print("|---" * (len(MARKS) + 1) + "|")
for w in sorted(rel):
    print(f"| {w} | " + " | ".join(f"{v:.0f}" for v in rel[w]) + " |")
print("\nmean wait at each barrier (cycles; exit − this warp's arrival)")
print("| barrier | " + " | ".join(f"w{w}" for w in sorted(rel)) + " |")
print("|---" * (len(rel) + 1) + "|")
for name, (a, b) in BARRIERS.items():
    print(f"| {name} | " + " | ".join(f"{rel[w][b] - rel[w][a]:.0f}" for w in sorted(rel)) + " |")
