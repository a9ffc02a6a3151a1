#!/usr/bin/env bash
# Next step (not run this session: no device time left): routed Kimi chunk libraries whose overlapped prep is held
# PREP_LEAD = 8 (HEAD), 12 and 16 chunks ahead of its chain, for a same-run A/B of P2 / P5 on the device
# (experiments/2026-12-02-prep-levels/lead_ab.py ROUNDS build/_lead/L8/... build/_lead/L12/... ...) and the overlap GPU
# tests on each. Why: beside the prep the two-stage chain does ≈ 1.9 µs of work a step and waits ≈ 0.9 µs for its
# ready flags (call 7); 8 chunks × 1.9 µs ≈ 15 µs is under one prep item's latency beside a state CTA (18.5 µs).
# L2: 32 chains (P2, P5) × 16 chunks × 72.5 KB slots = 37 MB; 66 chains (the most a default overlap admits) at 16
# would not fit the H200's L2 — a lead above 8 may need to shrink with the chain count.
set -eu -o pipefail
ROOT=$(git rev-parse --show-toplevel); cd "$ROOT"
export KDA2_CACHE_DIR=${KDA2_CACHE_DIR:-$ROOT/cache}
for L in 8 12 16; do
  WT=/tmp/wt-lead$L; rm -rf $WT; git worktree add -f $WT HEAD -q
  sed -i "s/static constexpr int PREP_LEAD = 8;/static constexpr int PREP_LEAD = $L;/" $WT/src/kda2/codegen/include/kda2/chunk.cuh
  (cd $WT && PYTHONPATH=$WT/src python3 -m kda2.tools.cli build -j2 kimi_linear_chunk -- build/kimi_linear_chunk/sm_90a)
  mkdir -p build/_lead/L$L && rm -rf build/_lead/L$L/kimi_linear_chunk && cp -r $WT/build/kimi_linear_chunk build/_lead/L$L/
  git worktree remove --force $WT
done
find build/_lead -name '*.o' -delete
tar cJf build/_ab/lead.tar.xz -C build _lead
