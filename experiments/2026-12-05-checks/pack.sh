#!/usr/bin/env bash
# Run here (the build host) before call.sh: the routed build of every default spec (build/<spec>/) as
# build/_ab/routed.tar.xz, and FLA 0.6's wheel in .whl/ (the device reaches no index).
set -euo pipefail
export PYTHONPATH=$PWD/src
python3 -m kda2.tools.cli build -j2
mkdir -p build/_ab .whl
tar cJf build/_ab/routed.tar.xz $(ls -d build/*/ | grep -v '/_' | grep -v '/\.' )
[ -n "$(ls .whl/fla_core-0.6.0*.whl 2>/dev/null)" ] || pip download -q --no-deps -d .whl fla-core==0.6.0
ls -la build/_ab .whl
