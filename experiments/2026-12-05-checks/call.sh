#!/usr/bin/env bash
# Device call (H200), carry ["build/_ab", ".whl"], after pack.sh: the GPU checks of what 2026-12-04/05 changed on a
# CPU only. 1) the FLA backend on FLA's own layer and model, bf16 and (new) an fp16 layer whose A_log / dt_bias are
# fp16; 2) the recurrent matrix (input dtype x gate-parameter dtype, now fp32 / bf16 / fp16, x GVA x layout) and the
# recurrent tests; 3) the chunk tests, FLA run on the two fp16-parameter cases only (each new FLA option set costs
# ~100 s of Triton JIT); 4) the C++ example and the monitor. Every test against fp64 (and FLA where it runs).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/routed.tar.xz || exit 3
pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PYTHONPATH:/tmp/site TRITON_CACHE_DIR=/tmp/triton
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $O/gpu.txt
run() {  # name, timeout, pytest args...
  local n=$1 t=$2; shift 2; el "$n"
  timeout "$t" python3 -m pytest -m gpu -q --require-gpu -rs -p no:cacheprovider --results-dir $O "$@" > $O/$n.log 2>&1
  echo "rc $?"; tail -1 $O/$n.log; grep -E "^FAILED|^ERROR" $O/$n.log | head -10
}
run fla_backend 280 tests/gpu/test_fla_backend_gpu.py -s
run recurrent 200 tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py
run chunk 200 tests/gpu/test_chunk_gpu.py --fla-cases fp16-T300-softplus-gva2-pfp16-kf,T300-lowerbound-pfp16-vf
run cpp_monitor 120 tests/gpu/test_cpp_example_gpu.py tests/gpu/test_monitor_gpu.py
el done
tar czf $OUT/checks.tgz -C /tmp o
