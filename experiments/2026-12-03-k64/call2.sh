#!/usr/bin/env bash
# Device call 2 (H200): call 1 on the every-candidate build of the widened small_head_recurrent (`kda2 build
# --candidates all small_head_recurrent`, carried): `kda2 tune` writes its tuning record, the GPU tests force every
# candidate kind, the matrix runs FLA on every case. Carried with build/.kda2 (the plan cache tune reads; a first try
# without it was refused).
. experiments/2026-12-03-peers/dev.sh
. experiments/2026-12-03-k64/steps.sh
L=build/small_head_recurrent/sm_90a
tune_step 200 160 12
rec_tests 300
grep -c "k_first" $O/recurrent-accuracy.md
finish call2
