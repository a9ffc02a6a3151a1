#!/usr/bin/env bash
# Device call 10 (H200): after the smem estimate's fix (k_map=all token stage rows depend on lane_cols), the plan
# swaps four persistent candidates for six never run: every persistent variant in its own process (T = 1 ones
# at T = 1, multi-token ones at T = 4 with per-token states), plain, and the multi-token ones under memcheck;
# then the recurrent GPU tests; then kda2 tune.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .fla/*.whl || exit 3
export TRITON_CACHE_DIR=/tmp/triton
M=build/kimi_linear_recurrent/sm_90a/manifest.json
python3 -c "
import json
for v in json.load(open('$M'))['variants']:
    c = v['config']
    if c.get('persistent'):
        print(v['index'], 4 if c.get('intermediate') else 1)" > $O/pers.txt
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
el "plain, one process per variant and pool dtype: $(wc -l < $O/pers.txt) variants"
while read i t; do for p in fp32 bf16; do echo "$i $p $t"; done; done < $O/pers.txt | xargs -P 8 -n 3 sh -c \
  'timeout 90 python3 experiments/2026-12-01-persist/isolate.py '$M' $0 $1 $2 > '$O'/plain_$0_$1.log 2>&1; echo "plain $0 $1 T$2 rc $?"' | sort -n -k2 > $O/plain.txt
grep -c "rc 0" $O/plain.txt; grep -v "rc 0" $O/plain.txt | head
el "memcheck, multi-token persistent variants (bf16 pool, T=4)"
grep " 4$" $O/pers.txt | while read i t; do echo "$i bf16 4"; done | xargs -P 8 -n 3 sh -c \
  'timeout 200 '$SAN' --tool memcheck --error-exitcode 86 --print-limit 5 python3 experiments/2026-12-01-persist/isolate.py '$M' $0 $1 $2 > '$O'/memcheck_$0_$1.log 2>&1; echo "memcheck $0 $1 T$2 rc $? $(grep -m1 -o "ERROR SUMMARY: [0-9]* error" '$O'/memcheck_$0_$1.log)"' | sort -n -k2 > $O/memcheck.txt
grep -c "rc 0 ERROR SUMMARY: 0 error" $O/memcheck.txt; grep -v "rc 0 ERROR SUMMARY: 0 error" $O/memcheck.txt | head
for f in $(grep -l "illegal\|ERROR SUMMARY: [1-9]" $O/memcheck_*.log 2>/dev/null | head -2); do echo "== $f"; grep -m8 -E "=========|Error|illegal" $f; done
el "recurrent GPU tests"
PYTHONPATH=$ROOT/src:/tmp/site timeout 300 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py \
  tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=kimi -rs \
  -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent tests rc $?"; tail -2 $O/gpu_recurrent.log
grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 200 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a \
  --tuning $TUN --margin 0.2 --time-limit 180 > $O/tune.log 2>&1; echo "tune rc $?"
grep -E "^  [kv]_first|wrote|candidates, |Error" $O/tune.log | head -60
el done
tar czf $OUT/call10.tgz -C /tmp o
