#!/usr/bin/env bash
# The next H200 call, carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz", "build/_ab/cand.tar.xz",
# "build/_ab/rec_head.tar.xz"]: 0) call21.sh — form r (form_r.patch) tested and timed beside j (the tree's) on an H200
# (it also runs on an H100; call20.sh, form q, likewise); 1) call14.sh — the tree's fused form beside the routed
# library and cuDNN-FE on P3, P4 and K1–K10 (on the H200 image cuDNN-FE is installed; the carried files stand in
# either way); 2)
# experiments/2026-12-05-tunebfs/call1.sh: kda2 tune of the Kimi and K = 64 candidates with the bfs twins, and ncu of
# the M1 routes. (Forms j / k of the 14:00 plan: j measured and in the tree since; k was not run — `form_k.patch`.)
set -u -o pipefail
bash experiments/2026-12-05-fused/call21.sh 2>&1 | tail -14
patch -p1 -R -s < experiments/2026-12-05-fused/form_r.patch   # call21 patched this machine's copy
bash experiments/2026-12-05-fused/call14.sh 2>&1 | tail -16
bash experiments/2026-12-05-tunebfs/call1.sh 2>&1 | tail -60
