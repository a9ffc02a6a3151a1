#!/usr/bin/env bash
# The next session's first H200 call, carry ["build/_ab/vall.tar.xz", "build/_ab/forms.tar.xz",
# "build/_ab/cand.tar.xz", "build/_ab/rec_head.tar.xz"] (forms.tar.xz holds the forms of this experiment, e1 among them;
# remake it from the README's list if it is gone: form e1 is kda2/fused.cuh at ca. 14:00 UTC 2026-12-05):
# 1) the tree's fused16 (form e1) on the H200 against the routed library and cuDNN-FE's fused kernel (bounded gate,
#    same process; issue 12's P3 bar is cuDNN's time), with forms j and k (the patches) — call9.sh's steps, then
#    time_fused.py on P3 P4 K10 K1–K9;
# 2) experiments/2026-12-05-tunebfs/call1.sh: kda2 tune of the Kimi and K = 64 candidates with the bfs twins, and ncu
#    of the M1 routes on the H200.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
bash experiments/2026-12-05-fused/call9.sh 2>&1 | tail -20
FUSED_SPLIT=0 FUSED_FORMS="e1=/tmp/forms/e1" timeout 240 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a /tmp/f9/time_k3.json P4 K1 K2 K3 K4 K5 K6 K7 K8 K9 2>&1 | tail -14
cp /tmp/f9/time_k3.json $OUT/call9/ 2>/dev/null
bash experiments/2026-12-05-tunebfs/call1.sh 2>&1 | tail -60
