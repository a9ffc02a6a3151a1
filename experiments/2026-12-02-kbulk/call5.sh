#!/usr/bin/env bash
# Device call 5 (H200): the rest of the GPU tests over this session's routed Kimi recurrent build (its tensor-map and
# dynamic-shared-memory launches): bundle (vendor / verify / load), the C++ example through the C ABI, the monitor,
# the runtime-only install. build/_ab/vG.tar.xz holds build/kimi_linear_recurrent/sm_90a as built (manifest's files).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/vG.tar.xz -C build || exit 3
rm -rf build/kimi_linear_recurrent && mv build/_gpu/kimi_linear_recurrent build/
timeout 420 python3 -m pytest -m gpu tests/gpu/test_bundle_gpu.py tests/gpu/test_cpp_example_gpu.py tests/gpu/test_monitor_gpu.py \
  tests/gpu/test_runtime_isolated.py -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_rest.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_rest.log; grep -E "^FAILED|^ERROR|SKIPPED" $O/gpu_rest.log | head -20
tar czf $OUT/call5.tgz -C /tmp o
