#!/usr/bin/env bash
# Device call 5 (H200): every candidate of the Kimi recurrent spec after the gate moved to the SFU (commit 6e7e835) and
# rules 0009 -> 0013 (the 4-CTA one-token bulk twins back): build/_ab/vA2.tar.xz, a CANDIDATES=all build (150 kernels).
# GPU tests with every persistent / bulk candidate forced, then kda2 tune (every candidate per dispatch row and class)
# against the repository's tuning record.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/vA2.tar.xz -C /tmp/ab || exit 3
NEW=/tmp/ab/_vA2/kimi_linear_recurrent
el "recurrent GPU tests (every candidate)"
KDA2_LIBRARY=$NEW timeout 260 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -12
el "tune"
rm -rf /tmp/tun && cp -r tuning /tmp/tun
timeout 240 python3 -m kda2.tools.cli tune $NEW/sm_90a --tuning /tmp/tun --record $O/kimi_linear_recurrent.h200.json --margin 0.2 \
  --time-limit 220 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first:|decode-n|prefill-n" $O/tune.log | head -60
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
el done
tar czf $OUT/call5.tgz -C /tmp o
