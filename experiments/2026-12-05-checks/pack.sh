#!/usr/bin/env bash
# Run here (the build host) before call.sh: the routed build of every default spec (build/<spec>/) as
# build/_ab/routed.tar.xz, and FLA 0.6's wheel in .whl/ (the device reaches no index).
set -euo pipefail
export PYTHONPATH=$PWD/src
python3 -m kda2.tools.cli build -j2
mkdir -p build/_ab .whl
tar cJf build/_ab/routed.tar.xz $(ls -d build/*/ | grep -v '/_' | grep -v '/\.' )
for w in fla-core flash-linear-attention; do   # FLA 0.6: its ops, and its layers and models
  [ -n "$(ls .whl/$(echo $w | tr - _)-0.6.0*.whl 2>/dev/null)" ] || pip download -q --no-deps -d .whl $w==0.6.0
done
ls -la build/_ab .whl
