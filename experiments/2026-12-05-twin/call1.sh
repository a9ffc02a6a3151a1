#!/usr/bin/env bash
# Device call 1 (H200; an H100 runs the tests only), carry ["build/_ab/cand_fused.tar.xz"]: the every-candidate build of
# kimi_linear_chunk/sm_90a with the fused twins (`kda2 build --candidates all kimi_linear_chunk` at this tree); 1) the
# fused kernel against the fp64 reference and its model (v ring of three, form v3) and the SASS check, the twins in the
# library bit for bit against the check kernel and split through their two kernels; 2) `kda2 tune` of that build into a
# copy of tuning/ (stops at the time limit keeping a partial record, which call 2 resumes).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
tar xJf build/_ab/cand_fused.tar.xz || exit 3
L=build/_candidates/kimi_linear_chunk/sm_90a
el tests
timeout 240 python3 -m pytest -m "gpu or compile" tests/gpu/test_fused_gpu.py tests/gpu/test_chunk_fused_twin_gpu.py \
  "tests/test_wgmma.py::test_fused_check_kernel_compiles_to_hgmma_without_local_memory" --chunk-library $L/manifest.json \
  -q -s --require-gpu -p no:cacheprovider -rs > $O/tests.log 2>&1
echo "tests rc $?"; grep -E "passed|failed|^E  |SKIPPED|^FAILED" $O/tests.log | head -12
cp -r tuning $O/tuning
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  el tune
  timeout 330 python3 -m kda2.tools.cli tune $L --tuning $O/tuning --margin 0.2 --time-limit 300 --force > $O/tune.log 2>&1
  echo "tune rc $?"; grep -E "^  [kv]_first|wrote|partial|stopped" $O/tune.log | tail -30
fi
el done
mkdir -p $OUT/call1 && cp -r $O/* $OUT/call1/
