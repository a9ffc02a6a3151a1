import csv, sys, collections, re
path = sys.argv[1]
rows = list(csv.reader(open(path)))
hdr = rows[1]; data = rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
stall_cols = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
tot_s = collections.Counter(); op_i = collections.Counter(); op_s = collections.Counter()
tot_samples = 0; tot_inst = 0
seq = []
for r in data:
    if len(r) < len(hdr): continue
    src = r[ix["Source"]].strip()
    op = re.sub(r"^@!?U?P\w+\s+", "", src).split(" ")[0]
    opb = op.split(".")[0]
    n = int(r[ix["Instructions Executed"]] or 0); s = int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)
    op_i[opb] += n; op_s[opb] += s; tot_samples += s; tot_inst += n
    for c in stall_cols: tot_s[c] += int(r[ix[c]] or 0)
    seq.append((r[ix["Address"]], src, n, s))
print("instr", tot_inst, "samples", tot_samples)
print("stalls:", ", ".join(f"{k[6:]} {100*v/tot_samples:.1f}" for k, v in tot_s.most_common(10)))
print("by opcode (instr %, samples %):")
for k, v in op_i.most_common(25): print(f"  {k:10s} {100*v/tot_inst:5.1f} {100*op_s[k]/tot_samples:5.1f}")
if len(sys.argv) > 2:
    top = sorted(seq, key=lambda x: -x[3])[:int(sys.argv[2])]
    for a, src, n, s in top: print(f"   {100*s/tot_samples:5.2f}% {n:9d} {a[-5:]} {src[:80]}")
