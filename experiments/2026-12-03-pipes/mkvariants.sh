#!/usr/bin/env bash
# Build kimi_linear_chunk (sm_90a) at HEAD and with each variant's patches applied, vendored to build/_ab/<name>
# (carried to the device by call2.sh). Run from the repository root with the venv active; restores chunk.cuh.
set -euo pipefail
export PYTHONPATH=$PWD/src KDA2_CACHE_DIR=${KDA2_CACHE_DIR:-$PWD/cache}
D=experiments/2026-12-03-pipes
declare -A V=([base]="" [rdiag]="rdiag" [noborrow]="noborrow" [s3]="step3_unroll2" [s6]="step6_unroll" [l2n]="l2norm_unroll" [all]="step3_unroll2 step6_unroll l2norm_unroll")
for name in "$@"; do
  for p in ${V[$name]}; do git apply $D/$p.patch; done
  python3 -m kda2.tools.cli build -j2 kimi_linear_chunk -- -Q build/kimi_linear_chunk/sm_90a > /tmp/mkv_$name.log 2>&1 \
    || { echo "build $name failed"; tail -5 /tmp/mkv_$name.log; git checkout src/kda2/codegen/include/kda2/chunk.cuh; exit 1; }
  rm -rf build/_ab/v_$name
  python3 -m kda2.tools.cli vendor --to build/_ab/v_$name --arch sm_90a kimi_linear_chunk > /dev/null
  echo "$name: $(grep -h -A3 "entry function 'kda2_chunk_prep_[0-9a-f]*'" build/kimi_linear_chunk/sm_90a/*.ptxas.log | grep -o 'Used [0-9]* registers' | tr '\n' ' ')"
  git checkout -q src/kda2/codegen/include/kda2/chunk.cuh
done
