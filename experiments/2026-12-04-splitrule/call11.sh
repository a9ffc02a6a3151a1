#!/usr/bin/env bash
# Device call 11 (H200): the libraries as committed (PREP_LEAD 24; kimi_linear_chunk byte-identical to call 10's
# lead24 build): the chunk GPU tests (split, accuracy without FLA, overlap) at K = 64, 128, 256, and overlap.py on
# four of the slow-head shapes.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/fin.tar.xz -C /tmp || exit 3
el overlap; timeout 60 python3 experiments/2026-12-04-splitrule/overlap.py /tmp/vfin/kimi_linear_chunk/sm_90a/manifest.json \
  $O/overlap.json B1T10240H24 B1T11264H22 B1T12288H28 B1T9728H26 > $O/overlap.log 2>&1; echo "rc $?"; cut -c1-160 $O/overlap.log
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "GPU tests $s"
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_gpu.py \
    tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu --chunk-library /tmp/vfin/$s/sm_90a --fla-cases none -rs \
    -p no:cacheprovider > $O/gpu_$s.log 2>&1; echo "rc $?"; tail -1 $O/gpu_$s.log; grep -E "^FAILED|^ERROR" $O/gpu_$s.log | head
done
el done
tar czf $OUT/call11.tgz -C /tmp o
