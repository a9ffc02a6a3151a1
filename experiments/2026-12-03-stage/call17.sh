#!/usr/bin/env bash
# Device call 17: a three-stage state pass (s3.patch applied: the knob `stages` may be 3, the Kimi chunk spec asks for 1, 2, 3). The
# every-candidate build of kimi_linear_chunk (`kda2 build --candidates all kimi_linear_chunk`, vendored to
# build/_ab/all_kimi_linear_chunk) is tuned (`kda2 tune`, every dispatch row, into a copy of tuning/), then the chunk
# GPU tests run on it (fp64 bar, split and overlap modules; no FLA). Carry build/_ab, with the build tree's plan cache
# (build/.kda2/plan-cache.json) copied to build/_ab/all_kimi_linear_chunk/.kda2/ (the tuner re-reads the plan there).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
LIB=build/_ab/all_kimi_linear_chunk/kimi_linear_chunk/sm_90a
TUN=$O/tuning; cp -r tuning $TUN
el tune
timeout 300 python3 -m kda2.tools.cli tune $LIB --tuning $TUN --margin 0.2 --time-limit 280 --force > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first|wrote|candidates, |rror|failure" $O/tune.log | head -40
el tests
timeout 240 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py \
  -q --require-gpu --chunk-library $LIB --fla-cases none --results-dir $O/acc -rs -p no:cacheprovider > $O/gpu.log 2>&1
echo "tests rc $? $(tail -1 $O/gpu.log)"; grep -E "^FAILED|^ERROR" $O/gpu.log | head -8
el done
tar czf $OUT/call17.tgz -C /tmp o
