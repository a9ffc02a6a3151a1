#!/usr/bin/env bash
# Device call 14, carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz"]: cuDNN-FE's fused Hopper KDA kernel on an
# H100 (its image has no nvidia-cudnn-frontend: from the PyPI wheel 1.32.0 (`pip download --no-deps`) the files
# kda2.bench.cudnn_peer's import of the Hopper host loads — cudnn/_device.py, cudnn/frost/{__init__,device}.py,
# cudnn/linear_attention/{__init__.py,cake,hopper} — and its dist-info, unpacked onto PYTHONPATH), timed in one process
# with the tree's fused form j and the routed Kimi chunk library on P3, P4 and cuDNN's ten Kimi-K3 shapes.
set -u -o pipefail
F=/tmp/f14; rm -rf $F; mkdir -p $F /tmp/cudnnpkg
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp || exit 3
tar xJf build/_ab/cudnn_fe.tar.xz -C /tmp/cudnnpkg || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/cudnnpkg
python3 -c "from kda2.bench.cudnn_peer import import_cuda_host, toolchain; h, i = import_cuda_host(); print(i['import'], i['version'], i['kernel'], i['smem_bytes']); print(toolchain(h))" 2>&1 | tail -3
FUSED_SPLIT=0 timeout 420 python3 experiments/2026-12-05-fused/time_fused.py /tmp/vall/kimi_linear_chunk/sm_90a \
  $F/time_fused.json P3 P4 K1 K2 K3 K4 K5 K6 K7 K8 K9 K10 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
mkdir -p $OUT/call14 && cp -r $F/* $OUT/call14/
