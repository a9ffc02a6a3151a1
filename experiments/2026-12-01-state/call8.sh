#!/usr/bin/env bash
# Device call 8 (H200): re-tune the three chunk libraries after rule 0001 v2 (the single-stage wgmma pass allowed at
# the 65536 bucket, where the library runs it beside the prep) and the 65536 bucket's second batch class (64 chains:
# no overlap there). The tuner times the library's default launch, so the overlap is in what it measures.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O/tuning
export PYTHONPATH=$ROOT/src
cp tuning/*_chunk.h200.json $O/tuning/
timeout 400 python3 -m kda2.tools.cli tune build/kimi_linear_chunk/sm_90a build/small_head_chunk/sm_90a \
  build/large_head_chunk/sm_90a --tuning $O/tuning --margin 0.2 --time-limit 380 --force > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first|wrote|failure" $O/tune.log | tail -40
cp $O/tuning/*.json $O/tune.log $OUT/
tar czf $OUT/failures.tgz -C $O/tuning failures 2>/dev/null
