#!/usr/bin/env bash
# Device call 16: HEAD, hotw (the prep writes every chunk into chunk 0's slot: its HBM writes mostly stay in L2; timing
# only) and hot+hotw (the state pass reading chunk 0's or 1's slot too), every kernel of P1 and P3 under ncu at boost
# clocks (phase_split.py), digested by ncu_split_table.py. VARIANTS / CALL pick others (call15.sh: base, hot).
# Before it: `mkvariants.sh base hotw hot+hotw`; carry build/_ab.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
VARIANTS=${VARIANTS:-base hotw hot+hotw}
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
for L in $VARIANTS; do
  timeout 240 ncu --clock-control none --kernel-name regex:kda2_ --metrics $M \
    python3 experiments/2026-12-03-stage/phase_split.py build/_ab/v_$L/kimi_linear_chunk > $O/ncu_$L.txt 2>&1
  echo "ncu $L rc $?"
done
python3 experiments/2026-12-03-stage/ncu_split_table.py $O $VARIANTS
tar czf $OUT/${CALL:-call16}.tgz -C /tmp o
