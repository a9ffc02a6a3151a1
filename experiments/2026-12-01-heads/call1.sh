#!/usr/bin/env bash
# Device call 1 (H200): the chunk kernels at K = V = 64 and 256 (small_head_chunk, large_head_chunk) on a GPU for
# the first time: FLA's Triton kernels warmed for those head dims (7 accuracy cases + P1-P6 softplus each, in
# parallel processes), the chunk GPU tests on both libraries (FLA in the same process for the warmed cases), the split
# tests, then the chunk benchmark at each head dim against FLA (P shapes with H scaled by 128/K, softplus gate).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton FLA_FLASH_KDA=0
CASES=T63-precomputed-kf,T64-softplus-bf16g-gva2-vf,T160-softplus-fp32g-nodt-noh0-kf,T500-lowerbound-safe-gva2-betabf16-vf,T1000-precomputed-nol2-nobsig-vf,varlen-15-100-300-1200-2000-softplus-bf16g-vf,fp16-T1000-lowerbound-betaf16-gva2-vf
el "fla warm"
( timeout 280 python3 -m kda2.bench.fla_warm --jobs 14 --cases $CASES --head-dims 64,256 > $O/warm_cases.log 2>&1 ) &
( timeout 280 python3 - > $O/warm_bench.log 2>&1 <<'PY'
import concurrent.futures as cf, multiprocessing as mp
from kda2.bench import fla_warm
todo = [t for t in fla_warm.tasks("bench", (64, 256)) if t[2] == "softplus"]
with cf.ProcessPoolExecutor(max_workers=8, mp_context=mp.get_context("spawn")) as pool:
    for f in cf.as_completed([pool.submit(fla_warm.run_task, t) for t in todo]):
        print(*f.result(), flush=True)
PY
) &
wait; tail -1 $O/warm_cases.log; grep -c " ok" $O/warm_bench.log; grep -i fail $O/warm_*.log | head -5
el "GPU tests"
timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
  --fla-cases=$CASES --results-dir $O -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1
echo "tests rc $?"; tail -2 $O/gpu_chunk.log; grep -E "^FAILED|^ERROR" $O/gpu_chunk.log | head -20
for K in 64 256; do
  el "bench K=$K"
  timeout 120 python3 -m kda2.bench chunk --head-dim $K --gates softplus --no-cudnn --iters 10 --out $O/bench_k$K \
    > $O/bench_k$K.log 2>&1; echo "bench K=$K rc $?"; grep -E "^ *P[1-6]" $O/bench_k$K.log
done
el done
tar czf $OUT/call1.tgz -C /tmp o
