"""Per-basic-block budget of one kernel from `ncu --page source --csv --print-source sass` (gzip'd csv): runs of
consecutive SASS rows with the same execution count are one block; prints each block's share of the executed warp
instructions and of the stall samples, its executions per item and its opcode mix, then the opcode totals and the
pipe they issue to (Hopper: ALU = integer / logic / compare / select, FMA = fp32 arithmetic and IMAD).
usage: python3 blocks.py SASS.csv.gz ITEMS [MIN_SHARE]"""
import collections
import csv
import gzip
import re
import sys

PIPES = {"ALU": "FMNMX FSETP FSEL LOP3 ISETP SHF SEL IADD3 PRMT PLOP3 LEA VIADD IABS MOV P2R R2P CS2R VIMNMX".split(),
         "FMA": "FMUL FADD FFMA IMAD HFMA2".split(), "XU": ["MUFU"], "F2FP": ["F2FP"], "TC": ["HMMA"],
         "LSU": "LDS STS LDSM STSM LDG STG LDGSTS SHFL LDC".split()}


def op_of(src: str) -> str:
    return re.sub(r"^@!?U?P[T0-9]+\s+", "", src.strip()).split(" ")[0].split(".")[0]


def main(path: str, items: int, min_share: float) -> None:
    rows = list(csv.reader(gzip.open(path, "rt")))
    hdr = rows[1]
    i_src, i_ex = hdr.index("Source"), hdr.index("Instructions Executed")
    i_st = hdr.index("Warp Stall Sampling (All Samples)")
    ins = [(r[i_src], int(r[i_ex] or 0), int(r[i_st] or 0)) for r in rows[2:] if len(r) > i_ex]
    tot = sum(n for _, n, _ in ins) or 1
    tot_st = sum(s for *_, s in ins) or 1
    print(f"warp instructions per item {tot / items:.0f}")
    blocks: list[dict] = []
    for idx, (s, n, st) in enumerate(ins):
        if blocks and blocks[-1]["n"] == n:
            blocks[-1]["ins"].append(s)
            blocks[-1]["st"] += st
        else:
            blocks.append({"start": idx, "n": n, "ins": [s], "st": st})
    for b in blocks:
        w = b["n"] * len(b["ins"])
        if w / tot < min_share and b["st"] / tot_st < min_share:
            continue
        ops = collections.Counter(op_of(s) for s in b["ins"])
        print(f"#{b['start']:5d} len {len(b['ins']):4d} x{b['n'] / items:6.2f}/item {100 * w / tot:5.1f}% instr "
              f"{100 * b['st'] / tot_st:5.1f}% stall ", dict(ops.most_common(9)))
    ops = collections.Counter()
    for s, n, _ in ins:
        ops[op_of(s)] += n
    pipe = collections.Counter()
    for op, n in ops.items():
        pipe[next((p for p, l in PIPES.items() if op in l), "other")] += n
    print("opcodes per item:", ", ".join(f"{o} {n / items:.0f}" for o, n in ops.most_common(24)))
    print("pipes per item:", ", ".join(f"{p} {n / items:.0f} ({100 * n / tot:.1f} %)" for p, n in pipe.most_common()))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0.004)


def phases(path: str, items: int, bounds: list[tuple[int, str]]) -> None:
    """Sum the rows from each SASS index in `bounds` (ascending, with the phase's name) to the next."""
    rows = list(csv.reader(gzip.open(path, "rt")))
    hdr = rows[1]
    i_ex, i_st = hdr.index("Instructions Executed"), hdr.index("Warp Stall Sampling (All Samples)")
    ins = [(int(r[i_ex] or 0), int(r[i_st] or 0)) for r in rows[2:] if len(r) > i_ex]
    tot, tot_st = sum(n for n, _ in ins), sum(s for _, s in ins)
    edges = [b for b, _ in bounds] + [len(ins)]
    print("| phase | warp instructions per item | % instructions | % stall samples |\n|---|---:|---:|---:|")
    for (lo, name), hi in zip(bounds, edges[1:]):
        n, s = sum(x for x, _ in ins[lo:hi]), sum(y for _, y in ins[lo:hi])
        print(f"| {name} | {n / items:.0f} | {100 * n / tot:.1f} | {100 * s / tot_st:.1f} |")
