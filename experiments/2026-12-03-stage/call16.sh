#!/usr/bin/env bash
# Device call 16: as call 15 (call15.sh) for HEAD, hotw (the prep writes every chunk into chunk 0's slot: its HBM writes
# mostly stay in L2; timing only) and hot+hotw (both), every kernel of P1 and P3 under ncu at boost clocks (phase_split.py).
# Before it: `mkvariants.sh base hotw hot+hotw`; carry build/_ab.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
for L in ${VARIANTS:-base hotw hot+hotw}; do
  timeout 240 ncu --clock-control none --kernel-name regex:kda2_ --metrics $M \
    python3 experiments/2026-12-03-stage/phase_split.py build/_ab/v_$L/kimi_linear_chunk > $O/ncu_$L.txt 2>&1
  echo "ncu $L rc $?"
done
python3 - $O ${VARIANTS:-base hotw hot+hotw} <<'PY'
import re, sys
for L in sys.argv[2:]:
    print("##", L)
    cur = None
    for line in open(f"{sys.argv[1]}/ncu_{L}.txt"):
        m = re.match(r"\s*(kda2_\w+?)_[0-9a-f]{12}\b.*", line)
        if m: cur = m.group(1); continue
        m = re.match(r"^(P\d \w+):", line)
        if m: print(line.rstrip()); continue
        m = re.search(r"(gpu__time_duration.sum|dram__bytes_read.sum|dram__bytes_write.sum|lts__t_sector_hit_rate.pct)\s+(\S+)\s+([\d.,]+)", line)
        if m and cur: print(f"  {cur:20s} {m.group(1):30s} {m.group(3)} {m.group(2)}")
PY
tar czf $OUT/call16.tgz -C /tmp o
