#!/usr/bin/env bash
# Device call 5 (H200): the final build (ABI 5: the overlap). GPU tests: the chunk tests and the overlap test on all
# three chunk specs, the recurrent tests on the kimi recurrent spec (its library is rebuilt against the new header);
# then this build on P1-P6, both gates: the routed variants do not overlap, so the times must match call 2's.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "chunk GPU tests $s"
  timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py \
    -q --require-gpu --chunk-library build/_vendF/$s/$s/sm_90a --fla-cases=none -rs -p no:cacheprovider > $O/gpu_$s.log 2>&1
  echo "$s rc $?"; tail -1 $O/gpu_$s.log
done
el "recurrent GPU tests"
KDA2_LIBRARY=build/_vendF/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a timeout 200 python3 -m pytest -m gpu \
  tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=none \
  -k "not compute_sanitizer" -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "recurrent rc $?"; tail -1 $O/gpu_recurrent.log
el "bench P (routed variants: none overlaps; compare call 2 of this session)"
timeout 150 python3 -m kda2.bench chunk --no-fla --no-cudnn --library build/_vendF/kimi_linear_chunk/kimi_linear_chunk/sm_90a \
  --shapes p --gates softplus,lower_bound --out $O/b_new > $O/b_new.log 2>&1; echo "rc $?"; grep -E "kda2" $O/b_new.log | head -12
rm -f $O/b_new/*.png
el done
tar czf $OUT/call5.tgz -C /tmp o
