#!/usr/bin/env bash
# Device call 1 (H200): `kda2 tune` of kimi_linear_recurrent with the occupancy agent's raised-launch-bounds
# candidates and 8-warp tiles (issue 11: decode N=64 k_first; issue 13: decode % of copy, M1); then an ncu
# profile of the chunk prep and state kernels on P1 (softplus) to direct the prep work (issue 12).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 240 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a --tuning $TUN --margin 0.2 \
  --time-limit 220 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, " $O/tune.log | head -40
el ncu
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for k in prep state; do
  timeout 150 $NCU --kernel-name regex:"_${k}_" --launch-skip 2 --launch-count 1 --set full --import-source yes \
    -o $O/p1_$k python3 -m kda2.bench chunk --no-fla --no-cudnn --library build/kimi_linear_chunk --shapes P1 \
    --gates softplus --layout k_first --iters 2 --warmup 1 --out $O/ncu_bench_$k > $O/ncu_$k.log 2>&1
  echo "ncu $k rc $?"; tail -2 $O/ncu_$k.log
  $NCU -i $O/p1_$k.ncu-rep --page details > $O/p1_${k}_details.txt 2>&1
  $NCU -i $O/p1_$k.ncu-rep --page source --csv --print-source sass > $O/p1_${k}_sass.csv 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|Memory Throughput|Compute \(SM\)" \
    $O/p1_${k}_details.txt | head -12
done
el done
tar czf $OUT/call1.tgz -C /tmp o
