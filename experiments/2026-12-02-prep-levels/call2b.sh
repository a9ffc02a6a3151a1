#!/usr/bin/env bash
# Device call 2b (H200): call 2's Kimi chunk accuracy tests again with FLA importable (the fixture imports it even when
# --fla-cases none runs none of it: call 2 errored at setup without it).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl && mkdir -p /tmp/ab && tar xJf build/_ab/lv.tar.xz -C /tmp/ab && PYTHONPATH=$PWD/src:/tmp/site timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu --fla-cases none --results-dir $OUT/acc_vN --chunk-library /tmp/ab/_vN/kimi_linear_chunk -rs -p no:cacheprovider > $OUT/gpu_kimi_vN.log 2>&1; echo "rc $?"; tail -1 $OUT/gpu_kimi_vN.log; grep -E "^FAILED|^ERROR" $OUT/gpu_kimi_vN.log | head
