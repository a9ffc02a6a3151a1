#!/usr/bin/env bash
# Device call 2 (H200): the Kimi recurrent spec's every candidate with the T = 1 preload twins (all.tar.xz, sm_90a, and
# its plan cache): recurrent GPU tests with the bulk / persistent / one-token preload variants forced, kda2 tune against
# the repository's record (the product's new record), then D1 / D2 / D3 / M1 with the old routes and the new winners
# forced, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh
unpack all
NEW=/tmp/ab/build/_all/kimi_linear_recurrent
rec_tests $NEW
tune $NEW kimi_linear_recurrent.h200.json
# the old routes (tuning/kimi_linear_recurrent.h200.json at the session's start) and the new winners
declare -A RUNS=([D2:k_first]="d12273ba3aeb $(win k_first 1 decode-n64)" [D2:v_first]="554e3bb662b7 $(win v_first 1 decode-n64)"
                 [D3:k_first]="2f680e623f3b $(win k_first 1 decode-n256)" [D3:v_first]="2674d2450fe7 $(win v_first 1 decode-n256)"
                 [D1:k_first]="add37fbc6a17 $(win k_first 1 decode-n1)" [D1:v_first]="079885349c53 $(win v_first 1 decode-n1)"
                 [M1:k_first]="76ee8257a276 $(win k_first 8 decode-n64)" [M1:v_first]="d5e2e307b97b $(win v_first 8 decode-n64)")
bench_runs $NEW D2:k_first D2:v_first D3:k_first D3:v_first D1:k_first D1:v_first M1:k_first M1:v_first
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
finish call2
