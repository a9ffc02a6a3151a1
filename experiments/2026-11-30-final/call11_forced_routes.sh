#!/usr/bin/env bash
# Device call 11 (H200): is the decode slowdown the kernels or the routes? This tree's build routed as the tuner chose
# (build/) vs the same kernels routed to the configurations the earlier record chose (build_forced/: k_first:1 ->
# vpw16 lane_cols 2, v_first:1 -> vpw8 blocked scatter), against .baseline; two rounds, same run.
set -u -o pipefail
ROOT=$PWD; mkdir -p /tmp/o
for r in 1 2; do
  for w in base tuned forced; do
    case $w in base) P=$ROOT/.baseline/src; L=.baseline/build;; tuned) P=$ROOT/src; L=build;; forced) P=$ROOT/src; L=build_forced;; esac
    PYTHONPATH=$P python3 -m kda2.bench recurrent --no-fla --library $L/kimi_linear_recurrent --shapes D1,D2,D3 \
      --out /tmp/o/${w}_$r > /tmp/o/${w}_$r.log 2>&1 || { echo "$w failed"; tail -3 /tmp/o/${w}_$r.log; continue; }
    python3 -c "
import json; d=json.load(open('/tmp/o/${w}_$r/bench_recurrent.json'))
print('$w $r', ' '.join(f\"{x['id']}/{x['layout'][0]} {x['graph_us']:.1f}us {x['pct_copy']:.0f}%\" for x in d['rows']))"
  done
done
