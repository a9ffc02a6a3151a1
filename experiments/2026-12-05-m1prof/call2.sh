#!/usr/bin/env bash
# Device call 2 (H200), carry ["build/_ab/vall.tar.xz", ".whl"]: this session's runtime changes on the GPU (chunk_kda
# in FLA's positional order, the default library by head dims, the forward-only warning, scalar checks): the chunk
# GPU tests of the three chunk specs (fp64 reference; FLA compared on no case: kernels byte-identical to those last
# compared), the recurrent matrix and recurrent files (fp64), and the default-library test; and (added after the
# prep-numerics study) tests/gpu/test_wgmma_gpu.py, whose blocked-substitution check (tests/kernels/bfs_check.cu,
# issue 12's w / u building block) has never run on a GPU: six groups at once.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/vall.tar.xz -C /tmp || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PYTHONPATH:/tmp/site TRITON_CACHE_DIR=/tmp/triton KDA2_BUILD_DIR=/tmp/vall
run() {  # name, timeout, pytest args...
  local n=$1 t=$2; shift 2
  timeout "$t" python3 -m pytest -m gpu -q --require-gpu -rs -p no:cacheprovider "$@" > $O/$n.log 2>&1
  echo "$n rc $?" >> $O/rc.txt
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
el "six groups at once"
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  run chunk_$s 500 tests/gpu/test_chunk_gpu.py --chunk-library /tmp/vall/$s --fla-cases none &
done
KDA2_LIBRARY=/tmp/vall/kimi_linear_recurrent run recurrent 450 tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py --fla-recurrent=none &
run default_lib 300 tests/gpu/test_default_library_gpu.py &
run wgmma 200 tests/gpu/test_wgmma_gpu.py &
wait
cat $O/rc.txt
for n in chunk_kimi_linear_chunk chunk_small_head_chunk chunk_large_head_chunk recurrent default_lib wgmma; do
  echo "== $n: $(tail -1 $O/$n.log)"; grep -E "^FAILED|^ERROR" $O/$n.log | head -10; done
el done
tar czf $OUT/call2.tgz -C /tmp o
