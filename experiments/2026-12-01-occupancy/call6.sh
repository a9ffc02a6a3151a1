#!/usr/bin/env bash
# Device call 6 (H200): the chunk accuracy cases compared against FLA 0.6 on every fp16 case (call 3 ran FLA on a
# subset), after fp16 intermediates; FLA's Triton JIT warmed for exactly those cases first.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export TRITON_CACHE_DIR=/tmp/triton PYTHONPATH=$ROOT/src:/tmp/site
CASES=$(python3 -c "from kda2.bench.cases import CASES; print(','.join(c.id for c in CASES if c.id.startswith('fp16-')))")
el "warm $CASES"
timeout 200 python3 -m kda2.bench.fla_warm --cases $CASES > $O/fla_warm.log 2>&1; echo "fla warm rc $?"; tail -1 $O/fla_warm.log
el "chunk accuracy tests (fp16 cases vs FLA)"
timeout 120 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu -k "fp16" \
  --chunk-library build/kimi_linear_chunk/sm_90a --fla-cases $CASES --results-dir $O/acc -rs -p no:cacheprovider \
  > $O/gpu_chunk.log 2>&1; echo "chunk fp16 tests rc $?"; tail -2 $O/gpu_chunk.log
grep -E "^E +AssertionError" $O/gpu_chunk.log | head
el done
tar czf $OUT/call6.tgz -C /tmp o
