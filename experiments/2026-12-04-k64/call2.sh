#!/usr/bin/env bash
# Device call 2 (H200), after call 1's record went into tuning/ and small_head_chunk was rebuilt and vendored here
# (build/_ab/new64.tar.xz: /tmp/vnew64/small_head_chunk; head.tar.xz from pack.sh): 1) the chunk GPU tests at K = 64
# on the new routes (accuracy without FLA, split, overlap); 2) the K = 64 benchmark, HEAD's library against the new
# one, alternating, two rounds, kda2 alone (--no-fla --no-cudnn); 3) FLA on the same shapes once, from the carried
# wheel (.whl/fla_core-0.6.0-py3-none-any.whl), its option sets warmed during the tests; 4) grid.py on the new routes.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
save() { tar czf $OUT/call2.tgz -C /tmp o 2>/dev/null; }   # after each step: a kill at the call's limit keeps the rest
tar xJf build/_ab/head.tar.xz -C /tmp || exit 3
tar xJf build/_ab/new64.tar.xz -C /tmp || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton FLA_FLASH_KDA=0
OLD=/tmp/vhead/small_head_chunk/small_head_chunk/sm_90a; NEW=/tmp/vnew64/small_head_chunk/small_head_chunk/sm_90a
( timeout 240 python3 -m kda2.bench.fla_warm --only bench --gates softplus --head-dims 64 > $O/fla_warm.log 2>&1; echo "fla warm rc $?" ) &
save; el "K = 64 GPU tests (new routes)"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py \
  tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library $NEW --fla-cases none -rs -p no:cacheprovider \
  > $O/gpu_new64.log 2>&1; echo "rc $?"; tail -1 $O/gpu_new64.log; grep -E "^FAILED|^ERROR" $O/gpu_new64.log | head
wait   # FLA's compiles done: timings from here on
for r in 1 2; do for lib in OLD NEW; do
  el "bench $lib round $r"
  timeout 90 python3 -m kda2.bench chunk --head-dim 64 --gates softplus --no-fla --no-cudnn --library ${!lib} \
    --shapes P1,P2,P3,P4,P5,P6,F1,F2,F3,F4 --out $O/b_${lib}_$r > $O/b_${lib}_$r.log 2>&1; echo "rc $?"; grep -E "^ *[PF][1-6] " $O/b_${lib}_$r.log
done; done
save; el "bench NEW with FLA"
timeout 200 python3 -m kda2.bench chunk --head-dim 64 --gates softplus --no-cudnn --library $NEW --shapes P1,P2,P3,P4,P5,P6 \
  --out $O/b_fla > $O/b_fla.log 2>&1; echo "rc $?"; grep -E "^ *P[1-6] " $O/b_fla.log
save; el grid64
timeout 100 python3 experiments/2026-12-04-k64/grid.py $NEW/manifest.json $O/grid64_new.json B1T4096H2 B1T4096H8 \
  B1T4096H16 B1T8192H4 B1T8192H16 B1T8192H32 B1T16384H8 B1T16384H24 > $O/grid64_new.log 2>&1; echo "rc $?"
save; el done
rm -f $O/*/*.png; tar czf $OUT/call2.tgz -C /tmp o
