#!/usr/bin/env bash
# Device call 5: the prep trace build (trace_prep.py applied to HEAD's chunk.cuh, built with the
# trace spec: `python experiments/2026-12-03-stage/trace_prep.py src/kda2/codegen/include/kda2/chunk.cuh && kda2 build
# -j2 kimi_linear_chunk -- SPECS_DIR=experiments/2026-12-03-stage/specs BUILD_DIR=build/_trace`, then git checkout
# src): one P1 and one P3 bench run each (softplus; the traced CTAs print their warps' marks), digested by
# trace_report.py. Carry build/_trace. Tarball $CALL.tgz (default call5; call 7 re-ran it on 9ad3e00, the
# symmetric exchange landed; call 8 on the --mid trace build, `call8.sh`).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o5t; rm -rf $O; mkdir -p $O
for s in P1 P3; do
  timeout 120 python3 -m kda2.bench chunk --no-fla --no-cudnn --library build/_trace/kimi_linear_chunk/sm_90a \
    --shapes $s --gates softplus --iters 3 --warmup 1 --out $O/b_$s > $O/trace_$s.log 2>&1
  echo "$s rc $? lines $(grep -c PREPTRACE $O/trace_$s.log)"
  python3 experiments/2026-12-03-stage/trace_report.py $O/trace_$s.log > $O/report_$s.md 2>&1; cat $O/report_$s.md
done
gzip $O/trace_*.log
tar czf $OUT/${CALL:-call5}.tgz -C /tmp o5t
