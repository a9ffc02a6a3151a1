#!/usr/bin/env bash
# Device call 12 (H200 wanted: cuDNN-FE is on its image), carry ["build/_ab/vall.tar.xz"]: the tree's form j against the
# routed Kimi chunk library and cuDNN-FE's fused kernel (bounded gate) on P3, P4 and cuDNN's ten Kimi-K3 shapes, same
# process; a quick fp64 check first.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
F=/tmp/f12; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import cudnn; print('cudnn-frontend', cudnn.__version__)" 2>&1 | tail -1
tar xJf build/_ab/vall.tar.xz -C /tmp || exit 3
timeout 100 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider -x \
  -k "T63 or T64 or T160 or varlen or stress" > $F/test_fused.log 2>&1; echo "tests rc $?"; tail -1 $F/test_fused.log
FUSED_SPLIT=0 timeout 400 python3 experiments/2026-12-05-fused/time_fused.py /tmp/vall/kimi_linear_chunk/sm_90a \
  $F/time_fused.json P3 P4 K1 K2 K3 K4 K5 K6 K7 K8 K9 K10 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call12 && cp -r $F/* $OUT/call12/
