#!/usr/bin/env bash
# Device call 4 (H200): kimi_linear_chunk as committed (the overlap's default from 35 % of the SMs; the kernels as in
# call 3): sweep.py on the shapes at the new edge, the chunk GPU tests at K = 128 without FLA.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/final.tar.xz -C /tmp || exit 3
N=/tmp/vfinal/kimi_linear_chunk/sm_90a/manifest.json
el sweep; timeout 90 python3 experiments/2026-12-04-overlap/sweep.py $N $O/sweep.json B1T4096H22 B1T6144H22 B1T3072H24 \
  B1T4096H24 B1T6144H24 B1T4096H26 B1T4096H32 B1T3072H32 B2T4096H12 B1T8192H33 > $O/sweep.log 2>&1; echo "rc $?"
cut -c1-170 $O/sweep.log
el "GPU tests"; timeout 120 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_gpu.py \
  tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library /tmp/vfinal/kimi_linear_chunk/sm_90a \
  --fla-cases none -rs -p no:cacheprovider > $O/gpu.log 2>&1; echo "rc $?"; tail -n 1 $O/gpu.log
el done
tar czf $OUT/call4.tgz -C /tmp o
