#!/usr/bin/env bash
# Device call 5 (H200): kimi_linear_chunk with the overlap's second short tier (>= 45 % of the SMs from 32 chunks):
# sweep.py on 56-64 state CTAs at 32-48 chunks, the chunk overlap GPU tests at K = 128.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/final.tar.xz -C /tmp || exit 3
N=/tmp/vfinal/kimi_linear_chunk/sm_90a/manifest.json
el sweep; timeout 90 python3 experiments/2026-12-04-overlap/sweep.py $N $O/sweep.json B1T2048H28 B1T3072H28 B1T2048H29 \
  B1T2048H30 B1T3072H30 B1T2048H31 B1T2048H32 B1T3072H32 B2T2048H15 B2T2048H16 B4T2048H8 B2T3072H16 \
  > $O/sweep.log 2>&1; echo "rc $?"; cut -c1-170 $O/sweep.log
el "GPU tests"; timeout 100 python3 -m pytest -m gpu tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu \
  --chunk-library /tmp/vfinal/kimi_linear_chunk/sm_90a --fla-cases none -rs -p no:cacheprovider > $O/gpu.log 2>&1
echo "rc $?"; tail -n 1 $O/gpu.log
el done
tar czf $OUT/call5.tgz -C /tmp o
