#!/usr/bin/env bash
# Device call 4 (H200): call 3 again with both chunk kernels at the most shared memory (the carveout: left to the
# driver, a state kernel's SM took no prep CTA beside it), the plain path's bits against main (main's runtime for
# main's ABI-4 library), the chunk GPU tests on this library.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
LIB=build/_vendE/kimi_linear_chunk/kimi_linear_chunk/sm_90a
X=experiments/2026-12-01-prep2/same_bits.py
el "same bits (plain launches)"
PYTHONPATH=$ROOT/build/_oldsrc timeout 100 python3 $X run build/_vendA/kimi_linear_chunk/kimi_linear_chunk/sm_90a $O/old.pt \
  && PYTHONPATH=$ROOT/src timeout 100 python3 $X run $LIB $O/new.pt && PYTHONPATH=$ROOT/src python3 $X cmp $O/old.pt $O/new.pt > $O/same_bits.log 2>&1
echo "same-bits rc $?"; grep -c identical $O/same_bits.log; rm -f $O/*.pt
export PYTHONPATH=$ROOT/src
el "overlap"
timeout 200 python3 experiments/2026-12-01-prep3/overlap.py $LIB $O/overlap.json > $O/overlap.log 2>&1
echo "overlap rc $?"; grep -v Warning $O/overlap.log | tail -16
el "GPU tests"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
PYTHONPATH=$ROOT/src:/tmp/site timeout 170 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q \
  --require-gpu --chunk-library $LIB --fla-cases=none -rs -p no:cacheprovider > $O/gpu_kimi_linear_chunk.log 2>&1
echo "rc $?"; tail -1 $O/gpu_kimi_linear_chunk.log
el done
tar czf $OUT/call4.tgz -C /tmp o
