#!/usr/bin/env bash
# Device call 2 (H200): the new split rule (kda2.plan.smem split_segments) in the routed libraries built from the
# working tree (tuned caps of the record as they were): 1) call 1's grid and a second one of other shapes, the
# library's choice (None) against forced splits (grid.py); 2) K = 64 and 256 on a few shapes; 3) the split GPU tests
# at K = 64, 128, 256.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/new.tar.xz -C /tmp || exit 3
L=/tmp/vnew; X=experiments/2026-12-04-splitrule/grid.py
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $O/gpu.txt
el grid1; timeout 120 python3 $X $L/kimi_linear_chunk/sm_90a/manifest.json $O/grid1.json > $O/grid1.log 2>&1; echo "rc $?"
G2=""; for t in 2560 3584 5632 7168 10240 24576 32768; do for h in 1 3 5 7 9 14 20 24; do G2="$G2 B1T${t}H$h"; done; done
G2="$G2 B3T4096H2 B3T4096H3 B3T4096H5 B3T8192H3 B3T8192H5 B2T16384H6 B2T16384H10"
el grid2; timeout 200 python3 $X $L/kimi_linear_chunk/sm_90a/manifest.json $O/grid2.json $G2 > $O/grid2.log 2>&1; echo "rc $?"
GS="B1T4096H2 B1T4096H8 B1T4096H16 B1T8192H4 B1T8192H16 B1T8192H32 B1T16384H8 B1T16384H24 B1T3072H8"
el grid64; HEAD_DIM=64 timeout 90 python3 $X $L/small_head_chunk/sm_90a/manifest.json $O/grid64.json $GS > $O/grid64.log 2>&1; echo "rc $?"
GL="B1T4096H1 B1T4096H4 B1T4096H8 B1T8192H1 B1T8192H2 B1T8192H4 B1T8192H8 B1T16384H2 B1T16384H6 B1T3072H2"
el grid256; HEAD_DIM=256 timeout 90 python3 $X $L/large_head_chunk/sm_90a/manifest.json $O/grid256.json $GL > $O/grid256.log 2>&1; echo "rc $?"
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "split tests $s"
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py -q --require-gpu --chunk-library $L/$s/sm_90a \
    -rs -p no:cacheprovider > $O/split_$s.log 2>&1; echo "rc $?"; tail -1 $O/split_$s.log; grep -E "^FAILED|^ERROR" $O/split_$s.log | head
done
el done
cp -r $O/. $OUT/
