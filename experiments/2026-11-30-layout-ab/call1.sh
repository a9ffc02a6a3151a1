#!/usr/bin/env bash
# Device call 1: same-run A/B of the kernels before (.baseline: the previous tree, its runtime and build) and
# after the move (this tree), both without FLA, alternating; then the recurrent GPU tests and the recurrent
# benchmark with FLA.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export TRITON_CACHE_DIR=$ROOT/.triton-cache TRITON_CACHE_AUTOTUNING=1; mkdir -p $TRITON_CACHE_DIR
nvidia-smi -L
new() { PYTHONPATH=$ROOT/src:/tmp/site python3 -m kda2.bench "$@"; }
old() { PYTHONPATH=$ROOT/.baseline/src:/tmp/site python3 -m kda2.bench "$@"; }
R=/tmp/raw; mkdir -p $R
for r in 1 2; do
  old chunk --no-fla --out $R/old_chunk_$r --library .baseline/build/kimi_linear_chunk > $R/old_chunk_$r.log 2>&1; echo "old chunk $r rc $?"
  new chunk --no-fla --out $R/new_chunk_$r --library build/kimi_linear_chunk > $R/new_chunk_$r.log 2>&1; echo "new chunk $r rc $?"
  old recurrent --no-fla --out $R/old_rec_$r --library .baseline/build/kimi_linear_recurrent > $R/old_rec_$r.log 2>&1; echo "old rec $r rc $?"
  new recurrent --no-fla --out $R/new_rec_$r --library build/kimi_linear_recurrent > $R/new_rec_$r.log 2>&1; echo "new rec $r rc $?"
done
python3 .gpu/ab_table.py $R | tee $OUT/ab_table.md
echo "== recurrent GPU tests"
PYTHONPATH=$ROOT/src:/tmp/site python3 -m pytest -m gpu tests/gpu --ignore=tests/gpu/test_chunk_gpu.py -q --require-gpu -rs -p no:cacheprovider 2>&1 | tee $R/gpu_tests.log | tail -15
echo "== recurrent benchmark with FLA"
new recurrent --out $R/rec > $R/bench_recurrent.log 2>&1; echo "rec bench rc $?"
cp $R/rec/bench_recurrent.json $R/rec/*.png $OUT/ 2>/dev/null
PYTHONPATH=$ROOT/src python3 -m kda2.bench readme-table $OUT/bench_recurrent.json | tee $OUT/bench_recurrent_table.md
tar czf $OUT/call1_raw.tgz -C /tmp raw; ls -la $OUT
