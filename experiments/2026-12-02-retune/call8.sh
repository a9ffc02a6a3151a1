#!/usr/bin/env bash
# Device call 8 (H200): the overlapped state pass acquiring its ready flags four at a time (wait_ready, READY_BATCH):
# the trace build on P2 / P5 (where the step's time goes now), the chunk GPU tests on the routed library (fp64 bar,
# split, overlap asked / refused on every routed variant: same bits), P1-P6 against the library before, alternating.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/x.tar.xz -C /tmp/ab || exit 3
timeout 60 python3 experiments/2026-12-02-retune/trace_run.py /tmp/ab/x/tr/sm_90a P2,P5 2>&1 > $O/trace.log; grep -E "^==|TRACE" $O/trace.log | head -40
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
timeout 100 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library /tmp/ab/x/new/sm_90a -rs \
  -p no:cacheprovider > $O/gpu_new.log 2>&1; echo "gpu tests rc $?"; tail -1 $O/gpu_new.log; grep -E "^FAILED|^ERROR" $O/gpu_new.log | head -6
for r in 1 2; do for lib in prev new; do
  timeout 40 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/x/$lib/sm_90a --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1 || echo "rc $?"
  echo "$r $lib $(grep -E '^ P[1-6]' $O/p_${lib}_$r.log | awk '{print $1, $5}' | tr '\n' ' ')"
done; done
rm -f $O/p_*/*.png
tar czf $OUT/call.tgz -C /tmp o
