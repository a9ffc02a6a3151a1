#!/usr/bin/env bash
# Device call 1 (H200), carry ["build/_ab/cand.tar.xz", "build/_ab/rec_head.tar.xz"]:
# 1) kda2 tune of the every-candidate builds of kimi_linear_chunk and small_head_chunk (now with prep_wu bfs twins)
#    into fresh records beside a copy of tuning/; 2) ncu (full set, per-SASS samples) of HEAD's routed M1 kernels
#    (N = 64, T = 4), both layouts, one call each (experiments/2026-12-05-m1prof: where an M1 CTA's time goes).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
tar xJf build/_ab/cand.tar.xz -C /tmp || exit 3
cp -r tuning $O/tuning
cd /tmp/pk
for s in kimi_linear_chunk small_head_chunk; do
  el "tune $s"
  timeout 230 python3 -m kda2.tools.cli tune build/_candidates/$s/sm_90a --specs $OLDPWD/kernel_specs --rules $OLDPWD/rules \
    --profiles $OLDPWD/profiles --tuning $O/tuning --margin 0.2 --time-limit 200 --force > $O/tune_$s.log 2>&1
  echo "tune $s rc $?"; grep -E "^  [kv]_first|wrote" $O/tune_$s.log | tail -24
done
cd $OLDPWD
P=$O/prof; mkdir -p $P
tar xJf build/_ab/rec_head.tar.xz -C /tmp || exit 3
L=/tmp/vrec/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for lay in k_first v_first; do
  el "ncu M1 $lay"
  timeout 120 $NCU --kernel-name regex:kda2 --launch-skip 3 --launch-count 1 --set full --import-source yes \
    -o $P/m1_$lay python3 experiments/2026-12-02-ring/one_call.py $L $lay 64 4 4 > $P/m1_$lay.log 2>&1
  echo "ncu $lay rc $?"; tail -1 $P/m1_$lay.log
  $NCU -i $P/m1_$lay.ncu-rep --page details > $P/m1_${lay}_details.txt 2>&1
  $NCU -i $P/m1_$lay.ncu-rep --page source --csv --print-source sass > $P/m1_${lay}_sass.csv 2>&1
  grep -E "^  [a-z_0-9]+ |Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|DRAM Throughput|Block Limit|Dynamic Shared" \
    $P/m1_${lay}_details.txt | head -20
  python3 experiments/2026-12-02-ring/sass_agg.py $P/m1_${lay}_sass.csv 12 | head -40
done
gzip $P/*_sass.csv
el done
tar czf $OUT/call1.tgz -C /tmp o
