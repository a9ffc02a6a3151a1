#!/usr/bin/env bash
# Run here before call1.sh: HEAD's routed recurrent builds (from experiments/2026-12-05-checks/pack.sh's
# build/_ab/routed.tar.xz, made before the change) as build/_ab/rec, this tree's (deferred decay) as build/_ab/new,
# in build/_ab/defer.tar.xz.
set -euo pipefail
export PYTHONPATH=$PWD/src
python3 -m kda2.tools.cli build -j2 kimi_linear_recurrent large_head_recurrent small_head_recurrent
rm -rf /tmp/defer && mkdir -p /tmp/defer/head /tmp/defer/build/_ab/rec /tmp/defer/build/_ab/new
tar xJf build/_ab/routed.tar.xz -C /tmp/defer/head
for s in kimi_linear_recurrent large_head_recurrent small_head_recurrent; do
  cp -r /tmp/defer/head/build/$s /tmp/defer/build/_ab/rec/
  cp -r build/$s /tmp/defer/build/_ab/new/
done
tar cJf build/_ab/defer.tar.xz -C /tmp/defer build/_ab/rec build/_ab/new
ls -la build/_ab/defer.tar.xz
