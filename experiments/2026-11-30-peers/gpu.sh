#!/usr/bin/env bash
# Issue 12 item 3 on the H200: kda2 vs FLA 0.6 vs cuDNN-FE 1.32's fused Hopper KDA forward, P1-P6 (softplus and
# lower_bound gates) and cuDNN-FE's ten Kimi-K3 shapes (k3 set, lower_bound gate), JSON + tables + roofline charts.
#
# Run from the repository root on the GPU host: build/ holds the chunk-family artifacts (or KDA2_CHUNK_LIBRARY names
# one), .whl/ holds fla_core-0.6.0, flash_linear_attention-0.6.0 and nvidia_cudnn_frontend-1.32.0-cp312 wheels; the
# image's python3 (3.12, torch 2.11+cu130, cuda-bindings, nvidia-cuda-nvrtc, matplotlib) runs everything.
#   OUT=/dir bash experiments/2026-11-30-peers/gpu.sh                  (default OUT: ./peers_out)
#   STEPS="probe warm" ...   then   STEPS="p k3 chart" ...             (two device calls of < 10 min each)
#   STEP_US=<µs of one 64-token state step> adds the serial-chain line to the roofline charts (else none;
#   `python -m kda2.bench.report --roofline JSON PNG --step-us US` redraws one later, on any machine).
# Steps: probe  = how cuDNN-FE imports (stand-in cudnn package, its NVRTC and CUDA include tree) and one small
#                 call per gate vs the float64 reference (compiles + caches both cubins); runs beside `warm`;
#        warm   = FLA's Triton compiles for every benchmark option set (P and k3), in parallel processes;
#        p, k3  = the benchmark (kda2, FLA, cuDNN kernel alone and with its input prep) -> $OUT/p, $OUT/k3;
#        chart  = roofline charts + markdown tables from the JSONs.
# Caches live under .triton-cache/ (git-ignored, kept between calls on a warm machine): Triton's, and
# cuDNN's cubins (CUDNN_FRONTEND_CAKE_CACHE_DIR). Expected: probe ~1-2 min (NVRTC, two flag sets) beside
# warm ~4-6 min (22 FLA option sets); p ~2-4 min; k3 ~1-2 min; chart seconds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT="${OUT:-$ROOT/peers_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
STEPS=" ${STEPS:-probe warm p k3 chart} "
step() { [[ "$STEPS" == *" $1 "* ]]; }

echo "== wheels: $(ls .whl 2>/dev/null | tr '\n' ' ')"
ls .whl/nvidia_cudnn_frontend-1.32*.whl >/dev/null 2>&1 || echo "(no nvidia_cudnn_frontend wheel in .whl/: cuDNN-FE will be reported as not importable)"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed" >&2; exit 3; }
export PYTHONPATH="$ROOT/src:/tmp/site"
export TRITON_CACHE_DIR="$ROOT/.triton-cache" TRITON_CACHE_AUTOTUNING=1
export CUDNN_FRONTEND_CAKE_CACHE_DIR="$ROOT/.triton-cache/cudnn-cake"
mkdir -p "$TRITON_CACHE_DIR" "$CUDNN_FRONTEND_CAKE_CACHE_DIR"
nvidia-smi -L || true
"$PY" -c 'import sys, torch, kda2; print("python", sys.version.split()[0], "torch", torch.__version__, "kda2", kda2.__file__)'
ls build/*/*/manifest.json 2>/dev/null | head -5

rc=0
probe_pid=
if step probe; then
  echo "== probe: cuDNN-FE import + one small call per gate (log: $OUT/cudnn_probe.log)"
  "$PY" -m kda2.bench.cudnn_peer --warm > "$OUT/cudnn_probe.log" 2>&1 &
  probe_pid=$!
fi
if step warm; then
  echo "== FLA warm-up (P set, then k3 set)"
  "$PY" -m kda2.bench.fla_warm --only bench 2>&1 | tee "$OUT/fla_warm_p.log" | tail -3
  "$PY" -m kda2.bench.fla_warm --only k3 2>&1 | tee "$OUT/fla_warm_k3.log" | tail -3
fi
if [ -n "$probe_pid" ]; then
  wait "$probe_pid"; echo "probe rc $?"; cat "$OUT/cudnn_probe.log"
fi

bench() {  # name, then kda2.bench chunk arguments
  local name=$1; shift
  echo "== benchmark $name"
  "$PY" -m kda2.bench chunk --out "$OUT/$name" ${STEP_US:+--step-us "$STEP_US"} "$@" 2>&1 | tee "$OUT/bench_$name.log"
  local r=${PIPESTATUS[0]}; echo "benchmark $name rc $r"; [ "$r" -ne 0 ] && rc=$r
  [ -f "$OUT/$name/bench_chunk.md" ] && cat "$OUT/$name/bench_chunk.md"
}
step p && bench p --shapes p --gates softplus,lower_bound
step k3 && bench k3 --shapes k3 --gates lower_bound

if step chart; then
  echo "== roofline charts"
  for name in p k3; do
    [ -f "$OUT/$name/bench_chunk.json" ] || continue
    "$PY" -m kda2.bench.report --roofline "$OUT/$name/bench_chunk.json" "$OUT/roofline_$name.png" \
      ${STEP_US:+--step-us "$STEP_US"} | tee "$OUT/roofline_$name.txt"
    "$PY" -m kda2.bench readme-table "$OUT/$name/bench_chunk.json" > "$OUT/table_$name.md"
  done
fi
ls -la "$OUT" "$OUT"/p "$OUT"/k3 2>/dev/null
exit $rc
