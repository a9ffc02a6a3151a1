#!/usr/bin/env bash
# Device call 2 (H200): the split's combine with 8 and 16 value columns per CTA instead of 32 (plan/smem.py
# COMBINE_COLS; 4× / 2× the CTAs, each with a shorter chain a segment) — routed chunk builds cc8, cc16 against HEAD's
# (head). The split GPU tests on cc8 and cc16, then the few-chain shapes F1–F4 (softplus, no peers) alternating, two
# rounds, and the per-kernel times of F1–F4 on each (kernels.py).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/cc.tar.xz -C /tmp || exit 3     # /tmp/cc/{head,cc8,cc16}
declare -A LIB=([head]=/tmp/cc/head/kimi_linear_chunk/sm_90a [cc8]=/tmp/cc/cc8/kimi_linear_chunk/sm_90a \
                [cc16]=/tmp/cc/cc16/kimi_linear_chunk/sm_90a)
for L in cc8 cc16; do
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py -q --require-gpu --chunk-library=${LIB[$L]} \
    -p no:cacheprovider > $O/split_$L.log 2>&1; echo "split tests $L rc $?: $(tail -1 $O/split_$L.log)"
done
for r in 1 2; do for L in head cc8 cc16; do
  timeout 80 python3 -m kda2.bench chunk --library ${LIB[$L]}/manifest.json --shapes f --gates softplus --no-fla \
    --no-cudnn --out $O/f_${L}_$r > $O/f_${L}_$r.log 2>&1 || echo "f $L $r failed"
  python3 -c "import json,sys; d=json.load(open('$O/f_${L}_$r/bench_chunk.json')); print('$L $r', ' '.join(f\"{x['id']} {x['kda2']['ms_median']:.4f}\" for x in d['rows']))"
done; done
for L in head cc8 cc16; do
  timeout 60 python3 experiments/2026-12-04-kernels/kernels.py ${LIB[$L]}/manifest.json $O/kernels_$L.json \
    F1:softplus F2:softplus F3:softplus F4:softplus > $O/kernels_$L.log 2>&1
  echo "== $L"; grep -E "^F" $O/kernels_$L.log | cut -c1-300
done
tar czf $OUT/call2.tgz -C /tmp o
