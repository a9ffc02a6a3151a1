# Sourced by this folder's device calls (run from the repository root on the device): the carried wheels (FLA 0.6.0,
# cuDNN-FE 1.32, in build/_ab/whl) installed into /tmp/site, the vendored sm_90a libraries of the six default specs
# unpacked under /tmp/ab/_vend/<spec>, $O the output folder and `el` elapsed seconds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  build/_ab/whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake FLA_FLASH_KDA=0
tar xJf build/_ab/libs.tar.xz -C /tmp/ab || exit 3
V=/tmp/ab/_vend
python3 -c "import fla, torch; print('fla', fla.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
# $O as one file (the device returns at most eight)
finish() { el done; rm -f $O/*/*.png; tar czf $OUT/$1.tgz -C /tmp o; }
# (Moved here from call2.sh / call3.sh after they ran: the same commands.) The chunk accuracy cases new on 2026-12-03
# ($NEW, GVA 4 / 8 and bf16 A_log / dt_bias) with FLA at head dim $1, from the vendored library of that head dim.
psp_bench() {
  el "bench P1-P6 softplus (FLA + cuDNN)"
  timeout 110 python3 -m kda2.bench chunk --library $LIB --shapes p --gates softplus --out $O/psp > $O/bench_psp.log 2>&1
  echo "p softplus rc $?"; grep -E "^\| P" $O/psp/bench_chunk.md
}
new_cases() {
  local K=$1 L=$V/kimi_linear_chunk; [ $1 = 256 ] && L=$V/large_head_chunk
  mkdir -p $O/k$K
  timeout 60 python3 -m pytest -m gpu "tests/gpu/test_chunk_gpu.py::test_matches_reference" -q --require-gpu \
    --chunk-library $L --fla-cases=$NEW --results-dir $O/k$K -rs -p no:cacheprovider -k "gva4 or gva8" \
    > $O/k$K/gpu_chunk.log 2>&1; echo "K=$K rc $?"; tail -1 $O/k$K/gpu_chunk.log
  grep -E "gva[48]" $O/k$K/chunk-accuracy.md | cut -d'|' -f3,5,6,8,9,11,12
}
