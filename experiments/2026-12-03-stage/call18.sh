#!/usr/bin/env bash
# Device call 18: the Kimi chunk library routed by call 17's tune (three-stage 64-column wgmma passes for the
# 2048 / 8192 few-chain classes and the 65536 V-first 64-head class; vendored to build/_ab/v_s3) — its chunk GPU tests
# (fp64 bar, the split and overlap modules), then bits and the two-round A/B against HEAD's routes (v_base) by
# pipes/call2.sh. Carry build/_ab.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py \
  -q --require-gpu --chunk-library build/_ab/v_s3/kimi_linear_chunk/sm_90a --fla-cases none -rs -p no:cacheprovider > /tmp/gpu_s3.log 2>&1
echo "tests rc $? $(tail -1 /tmp/gpu_s3.log)"; grep -E "^FAILED|^ERROR" /tmp/gpu_s3.log | head -8
CALL=call18 bash experiments/2026-12-03-pipes/call2.sh s3
cp /tmp/gpu_s3.log /tmp/o/ 2>/dev/null; tar czf $OUT/call18.tgz -C /tmp o
