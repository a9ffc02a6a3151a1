#!/usr/bin/env bash
# Device call 2: FLA warm-up, the chunk GPU tests (every case, FLA on the same inputs), the chunk benchmark with FLA.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
export TRITON_CACHE_DIR=$ROOT/.triton-cache TRITON_CACHE_AUTOTUNING=1; mkdir -p $TRITON_CACHE_DIR
R=/tmp/raw2; mkdir -p $R
python3 -m kda2.bench.fla_warm > $R/fla_warm.log 2>&1; echo "warm rc $?"; tail -2 $R/fla_warm.log
echo "== chunk GPU tests"
python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu --results-dir $OUT -rs -p no:cacheprovider 2>&1 | tee $R/gpu_tests_chunk.log | tail -8
cat $OUT/chunk-accuracy.md 2>/dev/null | head -40
echo "== chunk benchmark with FLA"
python3 -m kda2.bench chunk --out $OUT > $R/bench_chunk.log 2>&1; echo "chunk bench rc $?"
cat $OUT/bench_chunk.md
tar czf $OUT/call2_raw.tgz -C /tmp raw2; ls -la $OUT
