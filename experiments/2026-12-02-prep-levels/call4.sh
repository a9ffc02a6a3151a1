#!/usr/bin/env bash
# Device call 4 (H200): the landed build (vF: the levels on tf32 tensor cores, the prep held 8 chunks ahead in
# overlapped launches, the TIR stage's layouts for both) against vO (124c82a): P1-P6 softplus, kda2 alone, alternating,
# two rounds; the Kimi chunk GPU tests (fp64 bar, accuracy table; FLA importable, not run), the small-head ones and the
# large-head overlap and split ones.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
tar xJf build/_ab/fin.tar.xz -C /tmp/ab || exit 3
for r in 1 2; do for lib in vO vF; do
  timeout 40 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_$lib/kimi_linear_chunk --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1 || echo "$lib rc $?"
  echo "$r $lib $(grep -E '^ P[1-6]' $O/p_${lib}_$r.log | awk '{print $1, $5}' | tr '\n' ' ')"
done; done
el tests
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
timeout 70 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --results-dir $O/acc_vF --chunk-library /tmp/ab/_vF/kimi_linear_chunk \
  -rs -p no:cacheprovider > $O/gpu_kimi.log 2>&1; echo "kimi rc $?"; tail -1 $O/gpu_kimi.log; grep -E "^FAILED|^ERROR" $O/gpu_kimi.log | head -4
timeout 40 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library /tmp/ab/_vF/small_head_chunk \
  -rs -p no:cacheprovider > $O/gpu_small.log 2>&1; echo "small rc $?"; tail -1 $O/gpu_small.log
timeout 40 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --fla-cases none \
  --chunk-library /tmp/ab/_vF/large_head_chunk -rs -p no:cacheprovider > $O/gpu_large.log 2>&1; echo "large rc $?"; tail -1 $O/gpu_large.log
el done
rm -f $O/p_*/*.png
tar czf $OUT/call4.tgz -C /tmp o
