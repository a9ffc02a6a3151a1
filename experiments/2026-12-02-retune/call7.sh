#!/usr/bin/env bash
# Device call 7 (H200): where the wgmma state pass's chunk step goes, overlapped beside the prep and alone: a trace
# build (trace_patch.py: %globaltimer around the step's phases, thread 0 of three CTAs, printf of per-step means) of
# the routed Kimi chunk library; P2 and P5 overlapped and plain, P1 plain (trace_run.py). Not a landed build.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; mkdir -p /tmp/ab
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/tr.tar.xz -C /tmp/ab || exit 3
timeout 200 python3 experiments/2026-12-02-retune/trace_run.py /tmp/ab/tr/kimi_linear_chunk/sm_90a 2>&1 | tee $OUT/trace.log | grep -E "^==|TRACE" | head -80
