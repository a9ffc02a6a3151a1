#!/usr/bin/env bash
# Device call 3 (H200): the quarter anchors with one copy of the exact path's code and the overlap's default from
# 40 % of the SMs (build/_ab/new2.tar.xz) against
# HEAD (build/_ab/head.tar.xz): ab.py (the benchmark's decay and stronger), the chunk GPU tests at K = 64, 128, 256
# without FLA, then the stress cases against FLA 0.6 (carried wheel) at K = 128.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/head.tar.xz -C /tmp && tar xJf build/_ab/new2.tar.xz -C /tmp || exit 3
H=/tmp/vhead/kimi_linear_chunk/sm_90a/manifest.json; N=/tmp/vnew/kimi_linear_chunk/sm_90a/manifest.json
el ab; timeout 150 python3 experiments/2026-12-04-overlap/ab.py $H $N $O/ab.json drawn,4,8 P1 P3 P6 K3 K1 K8 F1 \
  > $O/ab.log 2>&1; echo "rc $?"; cut -c1-170 $O/ab.log
el sweep; timeout 60 python3 experiments/2026-12-04-overlap/sweep.py $N $O/sweep.json B1T4096H22 B1T4096H24 B1T4096H26 \
  B1T4096H32 B1T2048H32 B2T6144H16 > $O/sweep.log 2>&1; echo "rc $?"; cut -c1-170 $O/sweep.log
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "GPU tests $s"
  timeout 170 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_gpu.py \
    tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library /tmp/vnew/$s/sm_90a --fla-cases none -rs \
    -p no:cacheprovider > $O/gpu_$s.log 2>&1; echo "rc $?"; tail -n 1 $O/gpu_$s.log; grep -E "^FAILED|^ERROR" $O/gpu_$s.log | head
done
el "FLA on the stress cases"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > $O/pip.log 2>&1
PYTHONPATH=$PYTHONPATH:/tmp/site timeout 280 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu \
  -k "stress" --chunk-library /tmp/vnew/kimi_linear_chunk/sm_90a --results-dir $O/acc \
  --fla-cases stress-g-blockedge-precomputed-vf,stress-dtbias+6-softplus-vf,stress-g-20-precomputed-kf \
  -rs -p no:cacheprovider > $O/gpu_fla.log 2>&1; echo "rc $?"; tail -n 1 $O/gpu_fla.log; grep -E "^FAILED|^ERROR" $O/gpu_fla.log | head
ls $O/acc 2>/dev/null; grep -i 'stress' $O/acc/*.md 2>/dev/null | head
el done
tar czf $OUT/call3.tgz -C /tmp o
