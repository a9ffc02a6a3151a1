#!/usr/bin/env bash
# Device call 11 (H200; run four times: the first found test_monitor_gpu calling Library.select without its chains
# argument, the second that the test expected every call on the tuned row although N = 8 calls route to their own
# batch class, and the chunk rows' reason from before they were tuned, the third the Prometheus labels without `class`; fixed in
# the test before the fourth): the
# other GPU tests that drive the recurrent library, on the PDL + prepared build: the
# latency monitor (decode calls, graph capture pausing sampling, overhead) and the runtime without the build stack.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
KDA2_LIBRARY=build/_vend/rec_new/kimi_linear_recurrent/sm_90a timeout 300 python3 -m pytest -m gpu \
  tests/gpu/test_monitor_gpu.py tests/gpu/test_runtime_isolated.py -q --require-gpu -rs \
  --chunk-library=build/_vend2/chunk/kimi_linear_chunk/sm_90a \
  -p no:cacheprovider > $O/gpu_other.log 2>&1
echo "tests rc $?"; tail -3 $O/gpu_other.log; grep -E "^FAILED|^ERROR" $O/gpu_other.log | head
tar czf $OUT/call11.tgz -C /tmp o
