#!/usr/bin/env bash
# Device call 1 (H200): re-tune the three chunk libraries (every candidate, sm_90a) on today's kernels — the records
# date from 2026-12-01 19:55, before the prep's load groups, step 4 without its barrier, the tf32 block levels and the
# overlapped prep's lead; then the large-head split and overlap GPU tests on the routed build (last session's
# unfinished check) with --fla-cases none and FLA not installed (the fixture must neither import nor require it).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/all.tar.xz -C /tmp/ab || exit 3
TUN=$O/tuning; cp -r tuning $TUN
el tune
timeout 330 python3 -m kda2.tools.cli tune /tmp/ab/build/_all/kimi_linear_chunk/sm_90a /tmp/ab/build/_all/small_head_chunk/sm_90a \
  /tmp/ab/build/_all/large_head_chunk/sm_90a --tuning $TUN --margin 0.2 --time-limit 320 --force > $O/tune.log 2>&1
echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, |rror|failure" $O/tune.log | head -60
el tests
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu \
  --fla-cases none --chunk-library /tmp/ab/build/large_head_chunk/sm_90a -rs -p no:cacheprovider > $O/gpu_large.log 2>&1
echo "large rc $?"; tail -1 $O/gpu_large.log; grep -E "^FAILED|^ERROR" $O/gpu_large.log | head -4
el done
tar czf $OUT/call1.tgz -C /tmp o
