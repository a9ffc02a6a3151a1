#!/usr/bin/env bash
# Device call 14 (H200): the gate-parameter load without a branch. ncu of the same-config kernel (routes forced as in
# call 12), the recurrent GPU tests (bf16 / fp32 A_log and dt_bias, FLA on the Kimi form), decode D1-D3 vs .baseline.
set -u -o pipefail
ROOT=$PWD; mkdir -p /tmp/o
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl || exit 3
M=gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum,launch__registers_per_thread
PYTHONPATH=$ROOT/.bisect/fix/src timeout 60 ncu --nvtx --nvtx-include "kda2_call/" --metrics $M --csv python3 \
  experiments/2026-11-30-final/decode_probe.py .bisect/fix/build/kimi_linear_recurrent > /tmp/o/ncu_fix.csv 2>/dev/null
grep -o '"kda2_recurrent[^"]*","[^"]*","[^"]*","gpu__time_duration.sum","[^"]*","[^"]*"' /tmp/o/ncu_fix.csv | head -2
grep "gpu__time_duration" /tmp/o/ncu_fix.csv | awk -F'","' '{print $5, $(NF)}' | head -4
for r in 1 2; do for w in base fix; do
  case $w in base) P=$ROOT/.baseline/src; L=.baseline/build;; fix) P=$ROOT/src; L=build;; esac
  PYTHONPATH=$P python3 -m kda2.bench recurrent --no-fla --library $L/kimi_linear_recurrent --shapes D1,D2,D3 \
    --out /tmp/o/${w}_$r > /tmp/o/${w}_$r.log 2>&1 || { echo "$w failed"; tail -3 /tmp/o/${w}_$r.log; continue; }
  python3 -c "
import json; d=json.load(open('/tmp/o/${w}_$r/bench_recurrent.json'))
print('$w $r', ' '.join(f\"{x['id']}/{x['layout'][0]} {x['graph_us']:.1f}us {x['pct_copy']:.0f}%\" for x in d['rows']))"
done; done
PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton timeout 120 python3 -m pytest -m gpu \
  tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py -q --require-gpu --fla-recurrent=kimi \
  -k "not compute_sanitizer" -p no:cacheprovider 2>&1 | tail -2
