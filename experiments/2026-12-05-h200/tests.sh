#!/usr/bin/env bash
# Device call (any sm_90 GPU), carry ["build/_ab/routed_twin.tar.xz"]: the routed kimi_linear_chunk build's chunk GPU
# suite — the chunk cases, the twin's, the split's (with the long-memory cases), the overlap's — in two parallel groups.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
tar xJf build/_ab/routed_twin.tar.xz || exit 3
LIB=build/kimi_linear_chunk/sm_90a
t() { timeout 400 python3 -m pytest -m gpu "$@" --chunk-library $LIB/manifest.json --fla-cases none -q -p no:cacheprovider -rs; }
el "tests"
t tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py > $O/tests_split_overlap.log 2>&1 &
t tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_fused_twin_gpu.py > $O/tests_chunk_twin.log 2>&1
wait
for f in $O/tests_*.log; do echo "$(basename $f): $(grep -E '[0-9]+ (passed|failed)' $f | tail -1)"; grep -E "^FAILED|^ERROR" $f | head -8; done
el done; tar czf $OUT/tests.tgz -C /tmp o
