#!/usr/bin/env bash
# The next session's first H200 call (not run this session: no device time left), carry ["build/_ab/vall.tar.xz",
# "build/_ab/cand.tar.xz", "build/_ab/rec_head.tar.xz"] (cand / rec_head: remake them from HEAD, as the m1prof and
# tunebfs READMEs say, if the chunk or recurrent kernels changed since):
# 1) call3.sh: the two-CTAs-an-SM form of fused16 — the fp64 GPU tests (with its design's rounding model, and the
#    composed exact split), its time against the routed library (the split where chains are few; cuDNN-FE's kernel
#    where the machine has it), ncu of one P3 call;
# 2) experiments/2026-12-05-tunebfs/call1.sh: kda2 tune of the Kimi and K = 64 candidates with the bfs twins, ncu of
#    the M1 routes on the H200.
set -u -o pipefail
bash experiments/2026-12-05-fused/call3.sh 2>&1 | tail -60
bash experiments/2026-12-05-tunebfs/call1.sh 2>&1 | tail -80
