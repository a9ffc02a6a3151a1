#!/usr/bin/env bash
# GPU check: run on the GPU host from the repository root, with the artifacts already built under
# build/ (carried from the build host). Installs carried wheels (.whl/*.whl, e.g. fla-core) into a
# private target, runs the GPU tests (any skip is a failure), then the recurrent benchmark.
#   OUT=/some/dir scripts/gpu_check.sh        (default OUT: ./gpu_check_out)
# Exit status: non-zero if the tests failed (the benchmark still runs and is reported), or if the
# benchmark failed.
set -u -o pipefail
export PYTHONUNBUFFERED=1
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

echo "== nvidia-smi"
nvidia-smi || echo "(nvidia-smi failed)"
"$PY" - <<'EOF'
import torch, sys
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
EOF
echo "== artifacts"
ls build/*/*/manifest.json 2>/dev/null || echo "(no build/*/*/manifest.json: the tests will fail)"

echo "== GPU tests"
# GPU_CHECK_PYTEST_ARGS replaces "-x" (e.g. "" to see every failure in one run)
KDA2_REQUIRE_GPU=1 "$PY" -m pytest -m gpu tests/gpu -q ${GPU_CHECK_PYTEST_ARGS--x} -rs 2>&1 | tee "$OUT/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}
echo "== GPU tests exit status: $tests_rc"

echo "== benchmark"
"$PY" -m kda2.bench recurrent --out "$OUT" 2>&1 | tee "$OUT/bench.log"
bench_rc=${PIPESTATUS[0]}
if [ -f "$OUT/bench_recurrent.json" ]; then
  "$PY" -m kda2.bench readme-table "$OUT/bench_recurrent.json" | tee "$OUT/bench_table.md"
fi
echo "== done: tests $tests_rc, benchmark $bench_rc"
[ "$tests_rc" -ne 0 ] && exit "$tests_rc"
exit "$bench_rc"
