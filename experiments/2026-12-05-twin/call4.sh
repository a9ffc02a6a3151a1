#!/usr/bin/env bash
# Device call 4 (H100), carry ["build/_ab/routed_h100.tar.xz", "build/_ab/routed_h200rec.tar.xz",
# "build/_ab/cudnn_fe.tar.xz"]: the twin's gain through the library in one process — the same shapes on the routed build
# of the H100-targeting spec (tuning/kimi_linear_chunk.h100.json: P3's class on a fused twin) and on the default routed
# build (tuning/kimi_linear_chunk.h200.json: two kernels everywhere), two rounds alternating, bounded and softplus.
set -u -o pipefail
export PYTHONUNBUFFERED=1
O=/tmp/o4; rm -rf $O; mkdir -p $O /tmp/cudnnpkg
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
tar xJf build/_ab/routed_h100.tar.xz && tar xJf build/_ab/routed_h200rec.tar.xz || exit 3
export PYTHONPATH=$PWD/src
for r in 1 2; do
  for lib in _h100 ""; do
    L=build/$lib/kimi_linear_chunk/sm_90a; L=${L/\/\//\/}; n=${lib:-default}
    timeout 60 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes P3,P4,K10,P6 --gates lower_bound,softplus \
      --out $O/r$r-$n > $O/r$r-$n.log 2>&1
    echo "round $r $n rc $?"; grep -E "^\| (P|K)" $O/r$r-$n/bench_chunk.md | cut -d'|' -f2-4
  done
done
mkdir -p $OUT/call4 && tar czf $OUT/call4.tgz -C /tmp o4
