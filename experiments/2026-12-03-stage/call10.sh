#!/usr/bin/env bash
# Device call 10: bout.patch (step 6's copy-out by bulk copies) against HEAD: bits of five unsplit cases and the
# two-round A/B (pipes/call2.sh; call10.tgz), then bout applied to the working tree's three chunk specs: bits against
# HEAD's builds and the chunk GPU tests at K = 64, 128, 256 (pipes/call3.sh TESTS_ONLY; call10_tests.tgz) and the
# overlap GPU test at K = 128 (the ready flag after bulk writes). Before it: `mkvariants.sh base bout`, then `git apply
# bout.patch` and `kda2 build -j2 kimi_linear_chunk small_head_chunk large_head_chunk`. Carry build/_ab and the three.
CALL=call10 bash experiments/2026-12-03-pipes/call2.sh bout
TESTS_ONLY=1 CALL=call10_tests bash experiments/2026-12-03-pipes/call3.sh
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu \
  --chunk-library build/kimi_linear_chunk/sm_90a -p no:cacheprovider 2>&1 | tail -3
