#!/usr/bin/env bash
# Issue 13 on the H200: run from the repository root with build/ carried (scons -j1 on the build host
# builds kimi_linear_recurrent, small_head_recurrent (K=V=64), large_head_recurrent (K=V=256), kimi_linear_chunk).
# Budget: about 4 minutes of GPU time (no compute-sanitizer, no chunk benchmark, FLA only where it is cheap).
#   OUT=/some/dir bash experiments/2026-11-30-issue13/gpu.sh          (default OUT: ./gpu13_out)
# Steps (each still runs when an earlier one fails; the exit status is the first failure):
#   1. recurrent GPU tests, every built recurrent spec: tests/gpu/test_recurrent_matrix_gpu.py (input dtype x
#      A_log/dt_bias dtype x GVA 1/2/4/8 x layout; multi-token decode T=2/4/8 with per-token states; varlen
#      with a device-only cu_seqlens captured in a CUDA graph; bf16 decode state vs fp32; bad calls) and
#      tests/gpu/test_recurrent_gpu.py (the existing cases plus fp16 / bf16-parameter / GVA-3 ones), FLA 0.6
#      compared on the Kimi-Linear form (--fla-recurrent=kimi); bf16-state errors -> $OUT/bf16-state-accuracy.json
#   2. chunk tests that touch the shared runtime (bad inputs, graph capture, varlen), K=128 chunk library
#   3. the CPU unit tests that need torch (validation / args of the runtime; they skip on the build host)
#   4. decode benchmark, kimi_linear_recurrent (K=V=128, H=32): D1 (N=1, graph replay), D2/D3 (N=64/256),
#      M1 (multi-token T=4, N=64), D2h/D3h (bf16 states), both layouts, % of copy bandwidth -> $OUT/bench
#      (BENCH_FLA=1 adds FLA's rows: a Triton compile per shape and layout)
# FLA_RECURRENT=none|kimi|all picks the matrix cases compared against FLA (default kimi; under --require-gpu a
# missing FLA fails the matrix unless FLA_RECURRENT=none).
set -u -o pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu13_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" > /dev/null; then  # carried wheels (fla-core) into a private target
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
export TRITON_CACHE_DIR="$PWD/.triton-cache"; mkdir -p "$TRITON_CACHE_DIR"
nvidia-smi --query-gpu=name,driver_version --format=csv || true
ls build/*/*/manifest.json

rc1=0 rc2=0 rc3=0 rc4=0
echo "== 1. recurrent GPU tests (issue 13 matrix + existing cases)"
timeout 1500 "$PY" -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py -q \
  --require-gpu --results-dir "$OUT" --fla-recurrent="${FLA_RECURRENT:-kimi}" -k "not compute_sanitizer" -rs \
  2>&1 | tee "$OUT/gpu_tests_recurrent.log" | tail -60
rc1=${PIPESTATUS[0]}

echo "== 2. chunk GPU tests of the shared runtime (no accuracy table, no FLA)"
timeout 600 "$PY" -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --fla-cases=none \
  -k "bad_inputs or graph or device_only" -rs 2>&1 | tee "$OUT/gpu_tests_chunk.log" | tail -30
rc2=${PIPESTATUS[0]}

echo "== 3. runtime unit tests that need torch"
timeout 600 "$PY" -m pytest -q tests/test_dtypes_gva_decode.py tests/test_runtime_cpu.py -rs \
  2>&1 | tee "$OUT/unit_tests_torch.log" | tail -20
rc3=${PIPESTATUS[0]}

echo "== 4. decode benchmark (kimi_linear_recurrent)"
timeout 900 "$PY" -m kda2.bench recurrent --out "$OUT/bench" --library build/kimi_linear_recurrent \
  --shapes D1,D2,D3,M1,D2h,D3h $([ -n "${BENCH_FLA:-}" ] || echo --no-fla) \
  2>&1 | tee "$OUT/bench_recurrent.log"
rc4=${PIPESTATUS[0]}

echo "== done: recurrent tests $rc1, chunk tests $rc2, unit tests $rc3, benchmark $rc4"
for rc in "$rc1" "$rc2" "$rc3" "$rc4"; do [ "$rc" -ne 0 ] && exit "$rc"; done
exit 0
