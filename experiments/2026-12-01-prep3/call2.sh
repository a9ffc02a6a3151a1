#!/usr/bin/env bash
# Device call 2 (H200): the final build of this branch (call 1's prep with step 3's off-diagonal tile in one lambda:
# the same SASS up to register names). Bits against main on all three chunk specs, the K = 128 chunk GPU tests, the
# per-kernel split of the time on P1-P6 (ncu, during the FLA warm-up: where the state pass's share is), then the
# README's prefill table: FLA 0.6.0 and cuDNN-FE 1.32 in the same process, both gates, cuDNN's K3 shapes, roofline.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
X=experiments/2026-12-01-prep2/same_bits.py
LIB=build/_vendD/kimi_linear_chunk/kimi_linear_chunk/sm_90a
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "same bits $s"
  python3 $X run build/_vendA/$s/$s/sm_90a $O/old.pt && python3 $X run build/_vendD/$s/$s/sm_90a $O/new.pt \
    && python3 $X cmp $O/old.pt $O/new.pt > $O/same_bits_$s.log 2>&1
  echo "same-bits $s rc $?"; grep -c identical $O/same_bits_$s.log; rm -f $O/*.pt
done
el "GPU tests kimi_linear_chunk"
timeout 170 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
  --chunk-library $LIB --fla-cases=none -rs -p no:cacheprovider > $O/gpu_kimi_linear_chunk.log 2>&1
echo "rc $?"; tail -1 $O/gpu_kimi_linear_chunk.log
el "FLA warm-up (bench option sets) in the background; cuDNN compile; per-kernel durations"
timeout 330 python3 -m kda2.bench.fla_warm --only bench > $O/fla_warm.log 2>&1 & W=$!
timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "probe rc $?"
timeout 200 ncu --kernel-name regex:kda2_chunk --metrics gpu__time_duration.sum,launch__grid_size \
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $LIB --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
  --iters 1 --warmup 0 --out $O/dur > $O/ncu_dur.txt 2>&1; echo "ncu rc $?"
python3 - $O/ncu_dur.txt <<'PY' | tee $O/ncu_dur_summary.txt
import re, sys
cur = None
for line in open(sys.argv[1]):
    m = re.match(r'\s+(kda2_chunk_\w+)', line)
    if m: cur = m.group(1); continue
    m = re.search(r'(gpu__time_duration.sum|launch__grid_size)\s+\S+\s+([\d,.]+)', line)
    if m and cur: print(cur, m.group(1).split('__')[1], m.group(2))
PY
wait $W; echo "warm rc $?"; tail -1 $O/fla_warm.log
el "bench P, FLA + cuDNN"
timeout 150 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus,lower_bound --out $O/p > $O/bench_p.log 2>&1
echo "p rc $?"; grep -E "^\| P" $O/p/bench_chunk.md
el "bench K3, cuDNN"
timeout 90 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes k3 --gates lower_bound --out $O/k3 > $O/bench_k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10
python3 -m kda2.bench.report --roofline $O/p/bench_chunk.json $O/roofline_p.png > $O/roofline_p.txt 2>&1
el done
tar czf $OUT/call2.tgz -C /tmp o
