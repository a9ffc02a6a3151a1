#!/usr/bin/env bash
# GPU check: run on the GPU host from the repository root, with the artifacts already built (carried from the build
# host) under build/ by `scons` (the routed kernels), or with KDA2_BUILD_DIR=build/_candidates under that tree by
# `scons CANDIDATES=all` (every candidate: the forced-variant tests then run each one).
# Installs carried wheels (.whl/*.whl, e.g. fla-core) into a private target, runs the GPU tests (any skip is a
# failure, except a case the spec does not build by tests/gpu/feature_matrix.py), then the recurrent benchmark,
# then the chunk-family GPU tests (every case, accuracy table to $OUT/chunk-accuracy.{json,md}) and the chunk
# (prefill) benchmark ($OUT/bench_chunk.{json,md,png}).
#   OUT=/some/dir scripts/gpu_check.sh        (default OUT: ./gpu_check_out)
#   GPU_CHECK_STEPS="fla-warm chunk-tests chunk-bench" (default: tests bench chunk-tests chunk-bench) runs a subset.
# FLA's Triton kernels compile on first use (measured: over 100 s per option set on the H200 host, most of a
# session's device time). Step `fla-warm` compiles every option set the chunk tests and benchmark use in
# parallel processes first (python -m kda2.bench.fla_warm; FLA_WARM_ONLY=cases|bench narrows it; measured 352 s for all
# 32 sets with 13 processes); the cache (.triton-cache, ~670 MB) is too big to carry between sessions.
# The tests take pytest options (tests/conftest.py), passed here: --require-gpu to both test steps, --results-dir
# "$OUT" to the chunk tests, --chunk-library "$KDA2_CHUNK_LIBRARY" to them when that is set (the chunk benchmark
# reads the variable itself). Others go in GPU_CHECK_PYTEST_ARGS / GPU_CHECK_CHUNK_PYTEST_ARGS, e.g.
# GPU_CHECK_CHUNK_PYTEST_ARGS="--fla-cases=ID,ID" limits the accuracy cases run on FLA, "--seed N" changes the
# inputs (default: a fixed seed). The old test variables (KDA2_TEST_SEED, KDA2_REQUIRE_GPU, KDA2_RESULTS_DIR,
# KDA2_FLA_CASES) are refused before anything runs.
# Exit status: non-zero if any step failed (every step still runs and is reported): the first failing
# of recurrent tests, recurrent benchmark, chunk tests, chunk benchmark.
set -u -o pipefail
export PYTHONUNBUFFERED=1
for pair in KDA2_TEST_SEED:--seed KDA2_REQUIRE_GPU:--require-gpu KDA2_RESULTS_DIR:--results-dir \
            KDA2_FLA_CASES:--fla-cases; do
  var=${pair%%:*}
  if [ -n "${!var+x}" ]; then
    echo "$var is no longer read, unset it: the tests take ${pair#*:} (this script passes --require-gpu and" \
         "--results-dir itself; others go in GPU_CHECK_PYTEST_ARGS / GPU_CHECK_CHUNK_PYTEST_ARGS)" >&2
    exit 2
  fi
done
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"

# The package may not be pip-installed here: import it from the tree.
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" > /dev/null; then
  echo "== installing carried wheels: $(ls .whl | tr '\n' ' ')"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed" >&2; exit 3; }
  export PYTHONPATH="$PYTHONPATH:/tmp/site"  # PYTHONPATH entries precede site-packages: carried wheels win
fi

STEPS=" ${GPU_CHECK_STEPS:-tests bench chunk-tests chunk-bench} "
step() { [[ "$STEPS" == *" $1 "* ]]; }
tests_rc=0 bench_rc=0 chunk_tests_rc=0 chunk_bench_rc=0
export TRITON_CACHE_DIR="$PWD/.triton-cache"; mkdir -p "$TRITON_CACHE_DIR"
export TRITON_CACHE_AUTOTUNING=1  # Triton versions that know it keep autotune results in the cache too

echo "== nvidia-smi"
nvidia-smi || echo "(nvidia-smi failed)"
"$PY" - <<'EOF'
import torch, sys
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
EOF
echo "== artifacts"
ls "${KDA2_BUILD_DIR:-build}"/*/*/manifest.json 2>/dev/null \
  || echo "(no ${KDA2_BUILD_DIR:-build}/*/*/manifest.json: the tests will fail)"

warm_rc=0
if step fla-warm; then
  echo "== FLA warm-up (Triton compiles, one process per option set)"
  "$PY" -m kda2.bench.fla_warm ${FLA_WARM_ONLY:+--only "$FLA_WARM_ONLY"} 2>&1 | tee "$OUT/fla_warm.log"
  warm_rc=${PIPESTATUS[0]}
fi

if step tests; then
  echo "== GPU tests"
  # GPU_CHECK_PYTEST_ARGS replaces "-x" (e.g. "" to see every failure in one run)
  # (the chunk family's tests run in their own step below)
  "$PY" -m pytest -m gpu tests/gpu --ignore=tests/gpu/test_chunk_gpu.py -q --require-gpu ${GPU_CHECK_PYTEST_ARGS--x} -rs \
    2>&1 | tee "$OUT/gpu_tests.log"
  tests_rc=${PIPESTATUS[0]}
  echo "== GPU tests exit status: $tests_rc"
fi

if step bench; then
  echo "== benchmark"
  "$PY" -m kda2.bench recurrent --out "$OUT" 2>&1 | tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
  if [ -f "$OUT/bench_recurrent.json" ]; then
    "$PY" -m kda2.bench readme-table "$OUT/bench_recurrent.json" | tee "$OUT/bench_table.md"
  fi
fi

if step chunk-tests; then
  echo "== chunk GPU tests"
  # No -x: every case runs, so the accuracy table (ours vs FLA vs the fp64 reference) is complete.
  "$PY" -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu --results-dir "$OUT" \
    ${KDA2_CHUNK_LIBRARY:+--chunk-library "$KDA2_CHUNK_LIBRARY"} ${GPU_CHECK_CHUNK_PYTEST_ARGS-} -rs \
    2>&1 | tee "$OUT/gpu_tests_chunk.log"
  chunk_tests_rc=${PIPESTATUS[0]}
  [ -f "$OUT/chunk-accuracy.md" ] && cat "$OUT/chunk-accuracy.md"
  echo "== chunk GPU tests exit status: $chunk_tests_rc"
fi

if step chunk-bench; then
  echo "== chunk benchmark"
  "$PY" -m kda2.bench chunk --out "$OUT" 2>&1 | tee "$OUT/bench_chunk.log"
  chunk_bench_rc=${PIPESTATUS[0]}
  [ -f "$OUT/bench_chunk.md" ] && cat "$OUT/bench_chunk.md"
fi

echo "== done: FLA warm-up $warm_rc, tests $tests_rc, benchmark $bench_rc, chunk tests $chunk_tests_rc, chunk benchmark $chunk_bench_rc"
for rc in "$warm_rc" "$tests_rc" "$bench_rc" "$chunk_tests_rc" "$chunk_bench_rc"; do
  [ "$rc" -ne 0 ] && exit "$rc"
done
exit 0
