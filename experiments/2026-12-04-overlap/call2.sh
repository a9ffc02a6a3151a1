#!/usr/bin/env bash
# Device call 2 (H200): the quarter anchors in the prep's exact path and the overlap's short-sequence default
# (build/_ab/new.tar.xz) against HEAD (build/_ab/head.tar.xz): the chunk GPU tests at K = 64, 128, 256 (accuracy
# without FLA; with FLA on the three strong-decay stress cases at K = 128), ab.py at the benchmark's decay and
# stronger ones, sweep.py on the new default's shapes.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/head.tar.xz -C /tmp && tar xJf build/_ab/new.tar.xz -C /tmp || exit 3
H=/tmp/vhead/kimi_linear_chunk/sm_90a/manifest.json; N=/tmp/vnew/kimi_linear_chunk/sm_90a/manifest.json
el ab; timeout 150 python3 experiments/2026-12-04-overlap/ab.py $H $N $O/ab.json drawn,2,4,8,16 P1 P3 P6 K3 \
  > $O/ab.log 2>&1; echo "rc $?"; cut -c1-170 $O/ab.log
el sweep; timeout 90 python3 experiments/2026-12-04-overlap/sweep.py $N $O/sweep.json B1T2048H24 B1T3072H24 \
  B1T4096H24 B1T6144H24 B1T3072H32 B1T4096H32 B1T6144H32 B2T4096H16 B1T4096H20 B1T4096H22 B1T6144H22 \
  > $O/sweep.log 2>&1; echo "rc $?"; cut -c1-170 $O/sweep.log
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "GPU tests $s"
  timeout 170 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_gpu.py \
    tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library /tmp/vnew/$s/sm_90a --fla-cases none -rs \
    -p no:cacheprovider > $O/gpu_$s.log 2>&1; echo "rc $?"; tail -n 1 $O/gpu_$s.log; grep -E "^FAILED|^ERROR" $O/gpu_$s.log | head
done
el "FLA on the stress cases"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu -k "stress" \
  --chunk-library /tmp/vnew/kimi_linear_chunk/sm_90a --results-dir $O/acc \
  --fla-cases stress-g-blockedge-precomputed-vf,stress-dtbias+6-softplus-vf,stress-g-20-precomputed-kf \
  -rs -p no:cacheprovider > $O/gpu_fla.log 2>&1; echo "rc $?"; tail -n 1 $O/gpu_fla.log; grep -E "^FAILED|^ERROR" $O/gpu_fla.log | head
cat $O/acc/*.md 2>/dev/null | grep -i 'stress' | head
el done
tar czf $OUT/call2.tgz -C /tmp o
