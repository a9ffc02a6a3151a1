#!/usr/bin/env bash
# Device call 3 (H200): kda2 tune of the recurrent spec (new candidates: preload for multi-token decode,
# persistent T=1 decode when built) and of the chunk spec (the prep changed: its times are stale); chunk P1-P6
# with the new prep vs the previous build (build_untuned holds the prep before the merge; P1/P3/P4 route to the
# same variant in both); then the GPU tests (recurrent incl. every multi-token candidate by index; chunk with
# FLA on a subset of cases: FLA's Triton JIT is warmed for that subset in parallel processes first).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export TRITON_CACHE_DIR=/tmp/triton
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 200 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a build/kimi_linear_chunk/sm_90a \
  --tuning $TUN --margin 0.2 --time-limit 180 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, " $O/tune.log | head -60
el "chunk A/B (prep)"
for r in 1 2; do for lib in before after; do
  d=build; [ $lib = before ] && d=build_untuned
  python3 -m kda2.bench chunk --no-fla --no-cudnn --library $d/kimi_linear_chunk --shapes p --gates softplus \
    --layout k_first --out $O/prep_${lib}_$r > $O/prep_${lib}_$r.log 2>&1 && python3 -c "
import json; d=json.load(open('$O/prep_${lib}_$r/bench_chunk.json'))
print('$lib $r', ' '.join(f\"{x['id']} {x['kda2']['ms_median']:.3f}\" for x in d['rows']))" || { echo "$lib failed"; tail -3 $O/prep_${lib}_$r.log; }
done; done
el "GPU tests"
CASES=${FLA_SUBSET:-fp16-T65-precomputed-nofinal-kf,fp16-T500-softplus-f16g-kf,fp16-varlen-256-500-1000-lowerbound-gva2-noh0-kf,T500-softplus-nofinal-scale-kf,T2048-kimi-softplus-bf16g-H16-vf,varlen-15-100-300-1200-2000-softplus-bf16g-vf,stress-g-20-precomputed-kf}
PYTHONPATH=$ROOT/src:/tmp/site python3 -m kda2.bench.fla_warm --cases $CASES > $O/fla_warm.log 2>&1 &
WARM=$!
PYTHONPATH=$ROOT/src:/tmp/site timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=kimi -k "not compute_sanitizer" -rs \
  -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent tests rc $?"; tail -2 $O/gpu_recurrent.log
grep -E "FAILED" $O/gpu_recurrent.log | head -10
wait $WARM; echo "fla warm rc $?"; tail -8 $O/fla_warm.log
el "chunk tests"
PYTHONPATH=$ROOT/src:/tmp/site timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py \
  tests/gpu/test_chunk_split_gpu.py -q --require-gpu --chunk-library build/kimi_linear_chunk/sm_90a --fla-cases $CASES \
  --results-dir $O/acc -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1; echo "chunk tests rc $?"; tail -2 $O/gpu_chunk.log
grep -E "^E +AssertionError" $O/gpu_chunk.log | head -10
el done
tar czf $OUT/call3.tgz -C /tmp o
