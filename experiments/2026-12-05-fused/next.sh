#!/usr/bin/env bash
# The next device call (H100 or H200; ≈ 4 min), carry ["build/_ab/vall.tar.xz", "build/_ab/cudnn_fe.tar.xz",
# "build/_ab/forms11.tar.xz"]: call32.sh (form pw: the gate and l2norm a step ahead, in step 4's window), then, on a
# clean copy of the tree, call31.sh (form v3: the v ring that closes the reuse race). Each applies its patch to this
# machine's copy of the tree; the second reverses the first.
set -u -o pipefail
bash experiments/2026-12-05-fused/call32.sh 2>&1 | tail -14
patch -p1 -R -s < experiments/2026-12-05-fused/form_pw.patch
bash experiments/2026-12-05-fused/call31.sh 2>&1 | tail -12
