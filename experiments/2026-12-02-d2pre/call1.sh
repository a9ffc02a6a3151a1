#!/usr/bin/env bash
# Device call 1 (H200): the Kimi decode bucket (T = 1) with preload twins (PreloadAgent at T = 1: the token's inputs
# copied to shared memory beside the state, the gate / norms prepared once per CTA). d2pre.tar.xz: d2_pre.yaml's
# every candidate (sm_90a) and its plan cache. GPU tests (SKIP_TESTS=1: none; a T = 1-only library refuses longer
# calls), kda2 tune, then D1 / D2 / D3 with today's product routes and the tune's winners forced, alternating, two rounds.
. experiments/2026-12-02-d2pre/dev.sh
unpack d2pre
NEW=/tmp/ab/build/_d2pre/d2_pre
[ "${SKIP_TESTS:-0}" = 1 ] || rec_tests $NEW
tune $NEW d2_pre.h200.json
# today's product routes (tuning/kimi_linear_recurrent.h200.json) and the new winners
declare -A RUNS=([D2:k_first]="d12273ba3aeb $(win k_first 1 decode-n64)" [D2:v_first]="554e3bb662b7 $(win v_first 1 decode-n64)"
                 [D3:k_first]="2f680e623f3b $(win k_first 1 decode-n256)" [D3:v_first]="2674d2450fe7 $(win v_first 1 decode-n256)"
                 [D1:k_first]="add37fbc6a17 $(win k_first 1 decode-n1)" [D1:v_first]="079885349c53 $(win v_first 1 decode-n1)")
bench_runs $NEW D2:k_first D2:v_first D3:k_first D3:v_first D1:k_first D1:v_first
finish call1
