#!/usr/bin/env bash
# Device call 6 (H200): kda2/wgmma.cuh on the GPU for the first time (tests/gpu/test_wgmma_gpu.py: one warpgroup,
# m64n64k16 / m64n128k16, bf16 and fp16, A from registers, B from 128-byte-swizzled panels K-major and N-major,
# vs the fp64 product).
set -u -o pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/src
nvcc --version | tail -1
timeout 200 python3 -m pytest -m gpu tests/gpu/test_wgmma_gpu.py -q --require-gpu -rs -p no:cacheprovider 2>&1 | tail -30
