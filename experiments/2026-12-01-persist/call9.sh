#!/usr/bin/env bash
# Device call 9 (H200): the K = V = 64 and 256 recurrent libraries (small_head_recurrent, large_head_recurrent),
# never run on a GPU since their preload candidates were added: the recurrent GPU tests on each (every
# multi-token candidate by index included; FLA in the same process), then kda2 tune of both (TUNE=0: tests only;
# the first run lacked FLA: its 32 FLA-comparison tests errored, the tune ran).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export TRITON_CACHE_DIR=/tmp/triton
for S in small_head_recurrent large_head_recurrent; do
  el "GPU tests $S"
  PYTHONPATH=$ROOT/src:/tmp/site KDA2_LIBRARY=build/$S/sm_90a/manifest.json timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
    tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=kimi -rs -p no:cacheprovider > $O/gpu_$S.log 2>&1
  echo "$S tests rc $?"; tail -2 $O/gpu_$S.log; grep -E "^FAILED|^ERROR" $O/gpu_$S.log | head
done
[ "${TUNE:-1}" = 1 ] || { el done; tar czf $OUT/call9.tgz -C /tmp o; exit 0; }
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 200 python3 -m kda2.tools.cli tune build/small_head_recurrent/sm_90a build/large_head_recurrent/sm_90a \
  --tuning $TUN --margin 0.2 --time-limit 180 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, |Error" $O/tune.log | head -40
el done
tar czf $OUT/call9.tgz -C /tmp o
