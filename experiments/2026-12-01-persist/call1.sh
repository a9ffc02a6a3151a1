#!/usr/bin/env bash
# Device call 1 (H200), persistent T=1 decode re-landed (plain cp.async, no L2 cache hint): each persistent
# variant in its own process, plain then under compute-sanitizer memcheck (the 'illegal instruction' of
# 2026-12-01 call 3 poisoned the context, so its log could not name the variant); then the recurrent GPU tests;
# then kda2 tune of the recurrent library (do persistent kernels win any T=1 class?).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export TRITON_CACHE_DIR=/tmp/triton
M=build/kimi_linear_recurrent/sm_90a/manifest.json
IDX=$(python3 -c "import json; print(' '.join(str(v['index']) for v in json.load(open('$M'))['variants'] if v['config'].get('persistent')))")
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
el "plain, one process per variant: $IDX"
for i in $IDX; do for p in fp32 bf16; do echo "$i $p"; done; done | xargs -P 8 -n 2 sh -c \
  'timeout 60 python3 experiments/2026-12-01-persist/isolate.py '$M' $0 $1 > '$O'/plain_$0_$1.log 2>&1; echo "plain $0 $1 rc $?"' | sort -n -k2
el "memcheck, one process per variant"
for i in $IDX; do for p in fp32 bf16; do echo "$i $p"; done; done | xargs -P 8 -n 2 sh -c \
  'timeout 200 '$SAN' --tool memcheck --error-exitcode 86 --print-limit 5 python3 experiments/2026-12-01-persist/isolate.py '$M' $0 $1 > '$O'/memcheck_$0_$1.log 2>&1; echo "memcheck $0 $1 rc $? $(grep -m1 -o "ERROR SUMMARY: [0-9]* error" '$O'/memcheck_$0_$1.log)"' | sort -n -k2
grep -l "illegal\|Invalid\|ERROR SUMMARY: [1-9]" $O/plain_*.log $O/memcheck_*.log 2>/dev/null | head
for f in $(grep -l "illegal\|ERROR SUMMARY: [1-9]" $O/memcheck_*.log 2>/dev/null | head -2); do echo "== $f"; grep -m8 -E "=========|Error|illegal" $f; done
el "recurrent GPU tests"
PYTHONPATH=$ROOT/src:/tmp/site timeout 240 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=kimi -rs -x \
  -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent tests rc $?"; tail -2 $O/gpu_recurrent.log
grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 200 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a \
  --tuning $TUN --margin 0.2 --time-limit 180 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, |Error" $O/tune.log | head -60
el done
tar czf $OUT/call1.tgz -C /tmp o
