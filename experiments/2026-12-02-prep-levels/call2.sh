#!/usr/bin/env bash
# Device call 2 (H200): the Kimi chunk GPU tests on vN (fp64 bar, FLA not run: call 1's FLA comparison ran past its
# limit) with its accuracy table next to vO's from call 1; P2 / P5 with the library's overlap choice and with
# overlap=False, vO vs vN alternating (overlap_ab.py).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/lv.tar.xz -C /tmp/ab || exit 3
timeout 150 python3 experiments/2026-12-02-prep-levels/overlap_ab.py /tmp/ab/_vO/kimi_linear_chunk /tmp/ab/_vN/kimi_linear_chunk 3 > $O/overlap_ab.log 2>&1
echo "overlap_ab rc $?"; cat $O/overlap_ab.log | tail -26
el tests
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
timeout 150 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --results-dir $O/acc_vN --chunk-library /tmp/ab/_vN/kimi_linear_chunk \
  -rs -p no:cacheprovider > $O/gpu_kimi_vN.log 2>&1; echo "kimi vN rc $?"; tail -1 $O/gpu_kimi_vN.log; grep -E "^FAILED|^ERROR" $O/gpu_kimi_vN.log | head -6
el done
tar czf $OUT/call2.tgz -C /tmp o
