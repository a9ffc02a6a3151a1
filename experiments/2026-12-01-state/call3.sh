#!/usr/bin/env bash
# Device call 3 (H200): re-tune kimi_linear_chunk on this build (the wgmma state pass is faster: which variant wins
# each dispatch row and batch class may change, e.g. P6's 16 chains); the record comes back for the next build.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O/tuning
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
cp tuning/kimi_linear_chunk.h200.json $O/tuning/
timeout 330 python3 -m kda2.tools.cli tune build/kimi_linear_chunk/sm_90a --tuning $O/tuning --margin 0.2 --time-limit 300 \
  --force > $O/tune.log 2>&1
echo "tune rc $?"; tail -30 $O/tune.log
cp $O/tuning/*.json $OUT/; cp $O/tune.log $OUT/
ls $O/tuning/failures 2>/dev/null | head; tar czf $OUT/failures.tgz -C $O/tuning . 2>/dev/null
