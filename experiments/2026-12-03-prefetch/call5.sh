#!/usr/bin/env bash
# Device call 5 (prepared, not run): the unpredicated tile copies (zfill.patch, build/_ab/v_zfill by
# `mkvariants.sh base zfill`) against HEAD — bits and the two-round A/B by call1.sh (tarball call5.tgz) — then one
# P1 prep launch of each build under ncu (memory workload and source counters): the LDGSTS rows' L1 Wavefronts Shared
# Excessive, base against zfill (tarball call5_ncu.tgz).
set -u -o pipefail
CALL=call5 bash experiments/2026-12-03-prefetch/call1.sh zfill
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o5; rm -rf $O; mkdir -p $O
for v in base zfill; do
  timeout 200 ncu --kernel-name regex:kda2_chunk_prep --launch-skip 1 --launch-count 1 \
    --section MemoryWorkloadAnalysis_Tables --section SourceCounters --section WarpStateStats --import-source yes \
    -o $O/prep_$v python3 -m kda2.bench chunk --no-fla --no-cudnn --library build/_ab/v_$v/kimi_linear_chunk/sm_90a \
    --shapes P1 --gates softplus --iters 2 --warmup 1 --out $O/b_$v > $O/ncu_$v.log 2>&1
  echo "ncu $v rc $?"
  ncu -i $O/prep_$v.ncu-rep --page source --csv --print-source sass > $O/prep_${v}_sass.csv 2>&1
  rm -f $O/prep_$v.ncu-rep
  python3 - $O/prep_${v}_sass.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next(r for r in rows if "Source" in r and "Address" in r)
ix = {h: i for i, h in enumerate(hdr)}
num = lambda x: float(x.replace(",", "")) if x not in ("", "-") else 0.0
body = rows[rows.index(hdr) + 1:]
ld = [r for r in body if "LDGSTS" in r[ix["Source"]]]
print(sys.argv[1], "LDGSTS rows", len(ld), "excess shared wavefronts",
      sum(num(r[ix["L1 Wavefronts Shared Excessive"]]) for r in ld), "of", sum(num(r[ix["L1 Wavefronts Shared"]]) for r in ld))
PY
  gzip $O/prep_${v}_sass.csv
done
tar czf $OUT/call5_ncu.tgz -C /tmp o5
