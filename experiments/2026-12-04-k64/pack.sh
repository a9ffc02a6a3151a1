#!/usr/bin/env bash
# Run here (the build host) before a device call: HEAD's routed chunk libraries vendored (/tmp/vhead: small, large and
# kimi_linear_chunk) and every candidate of small_head_chunk (build/_all64: the wgmma state-pass twins at K = 64 among
# them) as build/_ab/head.tar.xz and build/_ab/all64.tar.xz, which call1.sh unpacks on the device.
set -euo pipefail
export PYTHONPATH=$PWD/src
mkdir -p build/_ab
rm -rf /tmp/vhead && mkdir -p /tmp/vhead
for s in small_head_chunk large_head_chunk kimi_linear_chunk; do
  python3 -m kda2.tools.cli vendor --to /tmp/vhead/$s --arch sm_90a $s > /dev/null
done
tar cJf build/_ab/head.tar.xz -C /tmp vhead
python3 -m SCons -Q -j2 SPECS=small_head_chunk CANDIDATES=all BUILD_DIR=build/_all64 > /tmp/pack_all64.log
tar cJf build/_ab/all64.tar.xz build/_all64/small_head_chunk build/_all64/.kda2   # .kda2: the plan tune reads
ls -la build/_ab
