# Sourced by this folder's device calls: routed Kimi chunk libraries build/_ab/chunk_<name>.tar.xz for each name in
# $LIBS unpacked to /tmp/<name>; $O the output folder; `el` elapsed seconds; `row` a bench log's shape/gate/ms columns.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
lib() { echo /tmp/$1/build/kimi_linear_chunk/sm_90a; }
for n in $LIBS; do mkdir -p /tmp/$n && tar xJf build/_ab/chunk_$n.tar.xz -C /tmp/$n || exit 3; done
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
S=experiments/2026-12-01-prep2/same_bits.py
row() { grep -E '^ ?(P[1-6]|K[0-9]+) ' $1 | awk '{print $1, $2, $5}' | tr '\n' ' '; }
# chunk GPU tests on library $1
gpu_tests() {
  timeout 170 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library $(lib $1) -rs \
    -p no:cacheprovider > $O/gpu_$1.log 2>&1; echo "gpu tests $1 rc $?: $(tail -1 $O/gpu_$1.log)"
  grep -E "^FAILED|^ERROR" $O/gpu_$1.log | head -6
}
# o / ht of the same-bits cases: library $1 saved once, each later name compared with it
same_bits() {
  local base=$1; shift
  timeout 60 python3 $S run $(lib $base) $O/$base.pt > /dev/null 2>&1 || echo "same-bits run $base failed"
  for n in "$@"; do
    timeout 60 python3 $S run $(lib $n) $O/$n.pt > /dev/null 2>&1 || echo "same-bits run $n failed"
    echo "same bits $base vs $n:"; python3 $S cmp $O/$base.pt $O/$n.pt 2>&1 | tail -8
  done
}
# $2 rounds of the $1 shape set (P: P1-P6 softplus; k3: cuDNN's K3 set, bounded), the names of $LIBS alternating
bench() {
  local set=$1 rounds=$2 args
  [ $set = P ] && args="--shapes P1,P2,P3,P4,P5,P6 --gates softplus" || args="--shapes k3"
  for r in $(seq 1 $rounds); do for n in $LIBS; do
    timeout 60 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $(lib $n) $args --out $O/${set}_${n}_$r \
      > $O/${set}_${n}_$r.log 2>&1 || echo "rc $?"
    echo "$set $r $n: $(row $O/${set}_${n}_$r.log)"
  done; done
}
# P1-P6 (softplus) at K = 64 and 256, one round, the builds /tmp/<name>_<spec> of each name given, alternating
bench_head_dims() {
  for s in small_head_chunk large_head_chunk; do
    [ $s = small_head_chunk ] && K=64 || K=256
    for w in "$@"; do
      timeout 90 python3 -m kda2.bench chunk --no-fla --no-cudnn --head-dim $K --library /tmp/${w}_$s/build/$s/sm_90a \
        --shapes P1,P2,P3,P4,P5,P6 --gates softplus --out $O/h_${w}_$K > $O/h_${w}_$K.log 2>&1 || echo "rc $?"
      echo "K=$K $w: $(row $O/h_${w}_$K.log)"
    done; el
  done
}
# the GPU test logs' summaries into $OUT/o/gpu.log
collect_gpu() {
  mkdir -p $OUT/o
  for f in $O/gpu_*.log; do echo "== $f"; grep -E "passed|failed|FAILED|ERROR" $f | tail -8; done > $OUT/o/gpu.log
}
