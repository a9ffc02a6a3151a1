# Sourced by this folder's device calls: the two routed Kimi chunk libraries (OLD_TAR, NEW_TAR in build/_ab) unpacked
# to $OLD and $NEW, the output folder $O, `el` (elapsed seconds) and `row` (a bench log's shape/gate/ms columns).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/old /tmp/new
tar xJf build/_ab/$OLD_TAR -C /tmp/old && tar xJf build/_ab/$NEW_TAR -C /tmp/new || exit 3
OLD=/tmp/old/build/kimi_linear_chunk/sm_90a; NEW=/tmp/new/build/kimi_linear_chunk/sm_90a
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
S=experiments/2026-12-01-prep2/same_bits.py
row() { grep -E '^ (P[1-6]|K[0-9]+)' $1 | awk '{print $1, $2, $5}' | tr '\n' ' '; }
# The chunk GPU tests on $NEW, then o / ht of the same-bits cases of $OLD and $NEW compared.
tests_and_bits() {
  timeout 150 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library $NEW -rs -p no:cacheprovider \
    > $O/gpu_new.log 2>&1; echo "gpu tests rc $?"; tail -1 $O/gpu_new.log; grep -E "^FAILED|^ERROR" $O/gpu_new.log | head -6
  el same-bits
  timeout 60 python3 $S run $OLD $O/old.pt > /dev/null 2>&1 && timeout 60 python3 $S run $NEW $O/new.pt > /dev/null 2>&1 \
    && python3 $S cmp $O/old.pt $O/new.pt 2>&1 | tail -12
}
# P1-P6 softplus, old and new alternating, $1 rounds.
bench_p() {
  for r in $(seq 1 $1); do for lib in old new; do
    L=/tmp/$lib/build/kimi_linear_chunk/sm_90a
    timeout 45 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
      --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1 || echo "rc $?"
    echo "P $r $lib: $(row $O/p_${lib}_$r.log)"
  done; done
}
# cuDNN-FE's ten Kimi-K3 shapes (bounded gate), old and new alternating, $1 rounds.
bench_k3() {
  for r in $(seq 1 $1); do for lib in old new; do
    L=/tmp/$lib/build/kimi_linear_chunk/sm_90a
    timeout 45 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes k3 --out $O/k_${lib}_$r \
      > $O/k_${lib}_$r.log 2>&1 || echo "rc $?"
    echo "K3 $r $lib: $(row $O/k_${lib}_$r.log)"
  done; done
}
