#!/usr/bin/env bash
# Device call 1 (H200), after pack.sh: 1) every candidate of small_head_chunk (the K = 64 wgmma state-pass twins among
# them) against the fp64 reference — the overlap GPU tests launch each variant overlapped and plain, the split tests
# fold on it; 2) kda2 tune of that build into $O/small_head_chunk.h200.json (the routes the next build takes);
# 3) forced splits 1-16 against the library's own choice over few-chain grids at K = 64 and 256 (grid.py, HEAD's routed
# libraries), the data to fit the split rule per head dim.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
save() { tar czf $OUT/call1.tgz -C /tmp o 2>/dev/null; }   # after each step: a kill at the call's limit keeps the rest
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/head.tar.xz -C /tmp || exit 3
tar xJf build/_ab/all64.tar.xz || exit 3
L=/tmp/vhead; A=build/_all64/small_head_chunk/sm_90a; X=experiments/2026-12-04-k64/grid.py
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $O/gpu.txt
save; el "GPU tests, every K = 64 candidate"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_overlap_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
  --chunk-library $A -rs -p no:cacheprovider > $O/gpu_all64.log 2>&1; echo "rc $?"; tail -1 $O/gpu_all64.log
grep -E "^FAILED|^ERROR" $O/gpu_all64.log | head -10
save; el tune
rm -rf /tmp/tun && cp -r tuning /tmp/tun
timeout 200 python3 -m kda2.tools.cli tune $A --tuning /tmp/tun --record $O/small_head_chunk.h200.json --margin 0.2 \
  --time-limit 180 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first:" $O/tune.log | head -20
G=""; for t in 2048 3072 4096 5120 6144 8192 12288 16384 32768; do for h in 1 2 3 4 6 8 12 16 20 24 32; do
  G="$G B1T${t}H$h"; done; done
G="$G B2T4096H8 B2T8192H4 B4T4096H4 B2T16384H8 B2T4096H16 B4T8192H4"
save; el grid64; timeout 150 python3 $X $L/small_head_chunk/small_head_chunk/sm_90a/manifest.json $O/grid64.json $G \
  > $O/grid64.log 2>&1; echo "rc $?"; tail -2 $O/grid64.log
G=""; for t in 2048 3072 4096 6144 8192 12288 16384 32768; do for h in 1 2 3 4 5 6 8 10 12; do G="$G B1T${t}H$h"; done; done
G="$G B2T4096H4 B2T8192H2 B4T4096H2 B2T16384H4"
save; el grid256; timeout 120 python3 $X $L/large_head_chunk/large_head_chunk/sm_90a/manifest.json $O/grid256.json $G \
  > $O/grid256.log 2>&1; echo "rc $?"; tail -2 $O/grid256.log
save; el done
tar czf $OUT/call1.tgz -C /tmp o
