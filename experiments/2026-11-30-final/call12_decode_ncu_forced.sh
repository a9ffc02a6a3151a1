#!/usr/bin/env bash
# Device call 12 (H200): call 8 with this tree routed to the old configurations (build_forced), before and after this
# session's merges, under ncu (every kernel of the two calls in the kda2_call NVTX ranges).
set -u -o pipefail
ROOT=$PWD
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,smsp__inst_executed.sum
for w in old new; do
  if [ $w = old ]; then P=$ROOT/.baseline/src; L=.baseline/build/kimi_linear_recurrent; else P=$ROOT/src; L=build_forced/kimi_linear_recurrent; fi
  PYTHONPATH=$P timeout 120 ncu --nvtx --nvtx-include "kda2_call/" --metrics $M --csv python3 \
    experiments/2026-11-30-final/decode_probe.py $L > $OUT/ncu_$w.csv 2> $OUT/ncu_$w.err; echo "$w rc $?"
  python3 - $OUT/ncu_$w.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = next(i for i, r in enumerate(rows) if "Metric Name" in r)
c = rows[h]; K, N, V, I = c.index("Kernel Name"), c.index("Metric Name"), c.index("Metric Value"), c.index("ID")
by = {}
for r in rows[h + 1:]:
    if len(r) > V:
        by.setdefault((r[I], r[K][:60]), {})[r[N]] = r[V]
for (i, k), m in by.items():
    print(i, k, {a.split("__")[1][:26]: b for a, b in m.items()})
PY
done
