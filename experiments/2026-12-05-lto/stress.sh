#!/usr/bin/env bash
# Link one recurrent kernel's LTO object N times, J at once (load on a 2-core host), and count the distinct outputs.
#   bash experiments/2026-12-05-lto/stress.sh MODE N J      MODE: nvlink | split | split-norand | ptxas
# nvlink: `nvlink -dlto` to a cubin, as the build did before 2026-12-05; split: `nvlink -dlto -emit-ptx`, then ptxas
# on that PTX (counts PTX and cubin); split-norand: the same under `setarch -R`; ptxas: ptxas alone on one PTX.
set -euo pipefail
MODE=$1 N=$2 J=$3
export PYTHONPATH=$PWD/src
OBJ=$(ls build/kimi_linear_recurrent/sm_90a/*_69ebfdfda8c2.o)
read -r NVLINK PTXAS LIB NVVM < <(python3 -c "
from pathlib import Path; from kda2.compile.toolchain import find_toolchain as f; t = f()
print(t.nvlink, t.ptxas, t.lib_dir(), t.nvvm_dir(Path('build/.toolchain')))")
W=$(mktemp -d); export OBJ NVLINK PTXAS LIB NVVM W MODE
[ "$MODE" = ptxas ] && "$NVLINK" -m64 --arch=sm_90a -dlto -nvvmpath="$NVVM" -L"$LIB" -lcudadevrt -emit-ptx "$OBJ" -o "$W/one.ptx"
one() {
  local i=$1 pre=()
  [ "$MODE" = split-norand ] && pre=(setarch "$(uname -m)" -R)
  case $MODE in
    nvlink) "$NVLINK" -m64 --arch=sm_90a -dlto -nvvmpath="$NVVM" -L"$LIB" -Xptxas -v -lcudadevrt "$OBJ" -o "$W/$i.cubin" \
              > /dev/null 2>&1; echo "$(sha256sum "$W/$i.cubin" | cut -c1-8)" ;;
    split|split-norand)
      "${pre[@]}" "$NVLINK" -m64 --arch=sm_90a -dlto -nvvmpath="$NVVM" -L"$LIB" -lcudadevrt -emit-ptx "$OBJ" -o "$W/$i.ptx"
      "${pre[@]}" "$PTXAS" -arch=sm_90a -v "$W/$i.ptx" -o "$W/$i.cubin" 2> /dev/null
      echo "$(sha256sum "$W/$i.ptx" | cut -c1-8) $(sha256sum "$W/$i.cubin" | cut -c1-8)" ;;
    ptxas) "$PTXAS" -arch=sm_90a "$W/one.ptx" -o "$W/$i.cubin"; echo "$(sha256sum "$W/$i.cubin" | cut -c1-8)" ;;
  esac
  rm -f "$W/$i.cubin" "$W/$i.ptx"
}
export -f one
echo "$MODE x$N, $J at once ($(date -u +%H:%M) UTC):"
seq 1 "$N" | xargs -P "$J" -I{} bash -c 'one {}' | sort | uniq -c
rm -rf "$W"
