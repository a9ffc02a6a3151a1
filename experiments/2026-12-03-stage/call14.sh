#!/usr/bin/env bash
# Device call 14: HEAD's Kimi chunk build (vendored: build/_ab/n_kimi_linear_chunk, call 13's) under ncu at boost clocks:
# the prep kernel's duration for 128 / 256 / 8192 items of one 8192-token sequence (2026-12-02-prep-latency's
# prep_latency.py: one item alone on an SM, two, P1), then every kernel of P1 and P3 (phase_split.py).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
LIB=build/_ab/n_kimi_linear_chunk/kimi_linear_chunk
M=gpu__time_duration.sum,launch__grid_size,sm__cycles_active.avg,smsp__inst_executed.sum
timeout 200 ncu --clock-control none --kernel-name regex:kda2_chunk_prep --metrics $M \
  python3 experiments/2026-12-02-prep-latency/prep_latency.py $LIB > $O/ncu_prep.txt 2>&1; echo "ncu prep rc $?"
timeout 240 ncu --clock-control none --kernel-name regex:kda2_ --metrics $M \
  python3 experiments/2026-12-03-stage/phase_split.py $LIB > $O/ncu_split.txt 2>&1; echo "ncu split rc $?"
python3 - $O <<'PY'
import re, sys
for f in ("ncu_prep.txt", "ncu_split.txt"):
    cur = None
    for line in open(f"{sys.argv[1]}/{f}"):
        m = re.match(r"\s*(kda2_\w+?)_[0-9a-f]{12}\b.*", line) or re.match(r"^(P\d \w+|H=\d+).*", line)
        if m: cur = m.group(1); print(line.rstrip()[:120]) if not cur.startswith("kda2") else None; continue
        m = re.search(r"(gpu__time_duration.sum|launch__grid_size|smsp__inst_executed.sum)\s+(\S+)\s+([\d.,]+)", line)
        if m and cur: print(f"  {cur:24s} {m.group(1):26s} {m.group(3)} {m.group(2)}")
PY
tar czf $OUT/call14.tgz -C /tmp o
