"""Digest phase_split.py's ncu logs (calls 15, 16): per launch, the prep's and the state pass's duration, DRAM bytes
and L2 hit rate. Usage: python ncu_split_table.py DIR VARIANT... (DIR/ncu_<VARIANT>.txt)"""
import re
import sys

LABELS = [f"{s} {g}" for s in ("P1", "P3") for g in ("softplus", "lower_bound") for _ in range(3)]
METRIC = re.compile(r"(gpu__time_duration.sum|dram__bytes_read.sum|dram__bytes_write.sum|lts__t_sector_hit_rate.pct)"
                    r"\s+(\S+)\s+([\d.,]+)")
for variant in sys.argv[2:]:
    recs, cur = [], None
    for line in open(f"{sys.argv[1]}/ncu_{variant}.txt"):
        m = re.match(r"\s+kda2_chunk_(\w+?)_[0-9a-f]{12}\b", line)
        if m:
            cur = {"kernel": m.group(1)}
            recs.append(cur)
            continue
        m = METRIC.search(line)
        if m and cur is not None:
            cur[m.group(1).split("__")[1].split(".")[0]] = float(m.group(3).replace(",", ""))
    assert len(recs) == 2 * len(LABELS), f"{variant}: {len(recs)} kernel records"
    cell = lambda r: (f"{r['time_duration']:6.1f} µs, R {r['bytes_read']:5.1f} / W {r['bytes_write']:5.1f} MB, "
                      f"L2 hit {r['t_sector_hit_rate']:4.1f} %")
    for i in range(0, len(recs), 2):
        print(f"| {variant} | {LABELS[i // 2]} | {cell(recs[i])} | {cell(recs[i + 1])} |")
