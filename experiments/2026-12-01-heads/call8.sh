#!/usr/bin/env bash
# Device call 8 (H200): the chunk library routed by call 7's tuning (wgmma state pass on most classes).
# 1. the chunk GPU tests on it (every accuracy case against fp64: gates, varlen, fp16, GVA, h0/ht both layouts;
#    the split tests, which run on the layout's mma_sync variant) while FLA's Triton kernels for P1-P6 compile;
# 2. tuned vs untuned (the agents' first choice: mma_sync), P1-P6 softplus, alternating, two rounds (no FLA);
# 3. the tuned library vs FLA 0.6 on P1-P6, softplus.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton FLA_FLASH_KDA=0
el "GPU tests + fla warm"
( timeout 200 python3 experiments/2026-12-01-heads/warm_bench128.py > $O/warm.log 2>&1; echo "warm rc $?" ) &
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
  --fla-cases=none --results-dir $O -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1
echo "chunk tests rc $?"; tail -1 $O/gpu_chunk.log; grep -E "^FAILED|^ERROR" $O/gpu_chunk.log | head -20
wait
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], " ".join(f"{r['id']} {r['kda2']['ms_median']:.3f}" + (f"/fla {r['fla']['ms_median']:.3f}" if r.get('fla') else "")
                           for r in d['rows']))
PY
}
for r in 1 2; do for lib in untuned tuned; do
  d=build; [ $lib = untuned ] && d=build_untuned
  el "round $r $lib"
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $d/kimi_linear_chunk --shapes p --gates softplus \
    --iters 10 --out $O/chunk_${lib}_$r > $O/chunk_${lib}_$r.log 2>&1 && summ $O/chunk_${lib}_$r/bench_chunk.json "$lib $r" \
    || { echo "$lib $r failed"; tail -3 $O/chunk_${lib}_$r.log; }
done; done
el "tuned vs FLA"
timeout 150 python3 -m kda2.bench chunk --no-cudnn --library build/kimi_linear_chunk --shapes p --gates softplus \
  --out $O/chunk_fla > $O/chunk_fla.log 2>&1 && summ $O/chunk_fla/bench_chunk.json "vs FLA" || tail -5 $O/chunk_fla.log
el done
tar czf $OUT/call8.tgz -C /tmp o
