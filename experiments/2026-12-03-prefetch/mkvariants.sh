#!/usr/bin/env bash
# Build kimi_linear_chunk (sm_90a) at HEAD and with each variant's patches applied, vendored to build/_ab/v_<name>
# (carried to the device by the call scripts). pfN: prefetch.patch with the prefetch distance N CTAs; allN: t16, s6stage
# and pfN together. late_N / lines_N: prefetch_late.patch (the prefetches after the CTA's own copies are issued; bulk
# prefetches, or prefetch.global.L2 per 128-byte line), distance N. Run from the
# repository root with the venv active; restores the headers.
set -euo pipefail
export PYTHONPATH=$PWD/src KDA2_CACHE_DIR=${KDA2_CACHE_DIR:-$PWD/cache}
D=experiments/2026-12-03-prefetch
H=src/kda2/codegen/include/kda2
for name in "$@"; do
  case $name in
    base) ;;
    t16) git apply $D/t16.patch ;;
    s6stage) git apply $D/s6stage.patch ;;
    l2n2) git apply $D/l2n2.patch ;;
    scanbar) git apply $D/scanbar.patch ;;
    zfill) git apply $D/zfill.patch ;;
    l2nscan) git apply $D/l2n2.patch; git apply $D/scanbar.patch ;;
    all*) git apply $D/t16.patch; git apply $D/s6stage.patch; git apply $D/prefetch.patch
          sed -i "s/#define KDA2_PREP_PREFETCH 264/#define KDA2_PREP_PREFETCH ${name#all}/" $H/chunk.cuh ;;
    late*|lines*) git apply $D/prefetch_late.patch
            sed -i "s/#define KDA2_PREP_PREFETCH 264/#define KDA2_PREP_PREFETCH ${name#*_}/" $H/chunk.cuh
            [ "${name%%_*}" = lines ] && sed -i "s/#define KDA2_PREP_PREFETCH_LINES 0/#define KDA2_PREP_PREFETCH_LINES 1/" $H/chunk.cuh ;;
    pf*) git apply $D/prefetch.patch; sed -i "s/#define KDA2_PREP_PREFETCH 264/#define KDA2_PREP_PREFETCH ${name#pf}/" $H/chunk.cuh ;;
    t16pf*) git apply $D/t16.patch; git apply $D/prefetch.patch
            sed -i "s/#define KDA2_PREP_PREFETCH 264/#define KDA2_PREP_PREFETCH ${name#t16pf}/" $H/chunk.cuh ;;
    *) echo "unknown variant $name"; exit 2 ;;
  esac
  python3 -m kda2.tools.cli build -j2 kimi_linear_chunk -- -Q build/kimi_linear_chunk/sm_90a > /tmp/mkv_$name.log 2>&1 \
    || { echo "build $name failed"; tail -5 /tmp/mkv_$name.log; git checkout $H; exit 1; }
  rm -rf build/_ab/v_$name
  python3 -m kda2.tools.cli vendor --to build/_ab/v_$name --arch sm_90a kimi_linear_chunk > /dev/null
  echo "$name: $(grep -h -A3 "entry function 'kda2_chunk_prep_[0-9a-f]*'" build/kimi_linear_chunk/sm_90a/*.ptxas.log | grep -o 'Used [0-9]* registers' | sort | uniq -c | tr '\n' ' ')"
  git checkout -q $H
done
