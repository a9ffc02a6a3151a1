#!/usr/bin/env bash
# Device call 5 (H200): the routed libraries with the new rule and the re-tuned caps (8192 bucket: 8 segments) against
# HEAD's (e8e3277, vendored): 1) call 1's grid on the new kimi_linear_chunk (the library's choice vs forced splits);
# 2) kda2 bench chunk, the P set (softplus), the K3 set (lower_bound) and the F set (softplus), old / new alternating,
# two rounds, no peers; 3) the chunk GPU tests (split, accuracy without FLA, overlap) at K = 64, 128, 256.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/libs.tar.xz -C /tmp || exit 3
NEW=/tmp/vnew/kimi_linear_chunk/sm_90a; OLD=/tmp/vchunk/kimi_linear_chunk/sm_90a
el grid; timeout 100 python3 experiments/2026-12-04-splitrule/grid.py $NEW/manifest.json $O/grid.json > $O/grid.log 2>&1; echo "rc $?"
for r in 1 2; do
  for L in old new; do
    LIB=$OLD; [ $L = new ] && LIB=$NEW
    for set in p:softplus k3:lower_bound f:softplus; do
      timeout 90 python3 -m kda2.bench chunk --library $LIB --shapes ${set%%:*} --gates ${set##*:} --no-fla --no-cudnn \
        --out $O/${set%%:*}_${L}_$r > $O/${set%%:*}_${L}_$r.log 2>&1 || echo "${set%%:*} $L $r failed"
    done
  done
  el "bench round $r"
done
for f in $O/*_old_1 $O/*_new_1 $O/*_old_2 $O/*_new_2; do echo "== $(basename $f)"; grep -E "^\| [PKF][0-9]" $f/bench_chunk.md | cut -d'|' -f2-4; done
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "GPU tests $s"
  timeout 130 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_gpu.py \
    tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library /tmp/vnew/$s/sm_90a --fla-cases none -rs \
    -p no:cacheprovider > $O/gpu_$s.log 2>&1; echo "rc $?"; tail -1 $O/gpu_$s.log; grep -E "^FAILED|^ERROR" $O/gpu_$s.log | head
done
el done
tar czf $OUT/call5.tgz -C /tmp o
