"""Aggregate an ncu per-SASS csv (warp-stall samples, shared wavefronts) by stall reason and by prep phase.

The phase of a SASS instruction comes from the line info of the same kernel rebuilt with -lineinfo
(nvdisasm -gi: the innermost chunk.cuh line inside Kernels::prep, through inlined helpers); the csv's rows
are matched to the disassembly by position (same compiler, same instruction count).
usage: python sass_phases.py SASS_CSV NVDISASM_GI_TXT KERNEL_SYMBOL PHASES(start:name,...) [FIRST_LINE LAST_LINE]
(FIRST_LINE, LAST_LINE: the prep body's chunk.cuh lines; default 190 628, the revision this was written for)
"""
import collections
import csv
import re
import sys

csv_path, dis_path, sym, phase_spec = sys.argv[1:5]
PROLO, PREP_END = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else (190, 628)
phases = sorted((int(s.split(":")[0]), s.split(":", 1)[1]) for s in phase_spec.split(","))


def phase_of(line):
    name = "prologue"
    for start, n in phases:
        if line >= start:
            name = n
    return name


# disassembly: per instruction, the innermost prep line of its line-info chain
lines, chain, inside = [], [], False
for raw in open(dis_path):
    if raw.startswith("//----") :
        inside = (".text." + sym) in raw   # the code section, not .nv.info
        continue
    if not inside:
        continue
    m = re.findall(r'chunk\.cuh", line (\d+)', raw)
    if m:
        chain.append([int(x) for x in m])
        continue
    if re.match(r"\s+/\*[0-9a-f]{4,5}\*/", raw):   # addresses past 0xffff
        cand = [x for c in chain for x in c if PROLO <= x <= PREP_END]
        lines.append((cand[0] if cand else None, raw.split("*/", 1)[1].strip().rstrip(" ;")))
        chain = []

rows = list(csv.reader(open(csv_path)))
hdr = rows[1]
data = rows[2:]
assert len(data) == len(lines), (len(data), len(lines))
col = {h: i for i, h in enumerate(hdr)}
stall_cols = [h for h in hdr if h.startswith("stall_") and "(Not Issued)" not in h]


def num(r, h):
    v = r[col[h]]
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return 0.0


last = None
by_phase = collections.defaultdict(lambda: collections.Counter())
by_reason = collections.Counter()
tot = collections.Counter()
insts = []
for (ln, text), r in zip(lines, data):
    if ln is not None:
        last = ln
    ph = phase_of(last) if last else "prologue"
    s = num(r, "Warp Stall Sampling (All Samples)")
    ex = num(r, "Instructions Executed")
    wf, wfi, exc = num(r, "L1 Wavefronts Shared"), num(r, "L1 Wavefronts Shared Ideal"), num(r, "L1 Wavefronts Shared Excessive")
    c = by_phase[ph]
    c["samples"] += s; c["inst"] += ex; c["wf"] += wf; c["wf_excess"] += exc
    for h in stall_cols:
        v = num(r, h)
        c[h] += v
        by_reason[h] += v
    tot["samples"] += s; tot["inst"] += ex; tot["wf"] += wf; tot["wf_excess"] += exc
    insts.append((s, exc, ex, ph, last, text, {h: num(r, h) for h in stall_cols}, r[col["Address"]], wf, wfi))

print(f"total samples {tot['samples']:.0f}, warp instructions {tot['inst']:.3e}, shared wavefronts {tot['wf']:.3e}, "
      f"excessive {tot['wf_excess']:.3e}")
print("\n## stall reasons (all samples)")
for h, v in by_reason.most_common(12):
    print(f"  {h:28s} {v:9.0f} {100 * v / tot['samples']:5.1f} %")
print("\n## by phase: samples %, instructions %, shared wavefronts %, excessive wavefronts %, top 3 stalls")
order = [n for _, n in phases]
for ph in ["prologue"] + order:
    c = by_phase.get(ph)
    if not c:
        continue
    top = sorted(((c[h], h) for h in stall_cols), reverse=True)[:3]
    tops = ", ".join(f"{h[6:]} {100 * v / max(c['samples'], 1):.0f}%" for v, h in top)
    print(f"  {ph:24s} samp {100 * c['samples'] / tot['samples']:5.1f}  inst {100 * c['inst'] / tot['inst']:5.1f}  "
          f"wf {100 * c['wf'] / tot['wf']:5.1f}  excess {100 * c['wf_excess'] / max(tot['wf_excess'], 1):5.1f}  | {tops}")
print("\n## top 25 instructions by samples")
for s, exc, ex, ph, ln, text, st, addr, wf, wfi in sorted(insts, key=lambda t: -t[0])[:25]:
    top = sorted(((v, h) for h, v in st.items()), reverse=True)[:2]
    print(f"  {s:6.0f} {100 * s / tot['samples']:4.1f}% line {ln} [{ph}] {text[:60]:60s} " +
          ", ".join(f"{h[6:]} {v:.0f}" for v, h in top))
print("\n## top 20 instructions by excessive shared wavefronts (wavefronts / ideal)")
for s, exc, ex, ph, ln, text, st, addr, wf, wfi in sorted(insts, key=lambda t: -t[1])[:20]:
    print(f"  {exc:10.0f} {100 * exc / tot['wf_excess']:4.1f}% line {ln} [{ph}] {text[:60]:60s} {wf:.0f}/{wfi:.0f}")
