#!/usr/bin/env bash
# Device call 4 (H200): gs = 1c56bc8's routed Kimi chunk library (the session's trims); st = gs plus step 6's uᵀ staged
# by stmatrix.trans on sm_90 (four 8×8 blocks per instruction instead of per-element 16-bit stores; the same bits
# expected). In the background first: the Kimi GPU accuracy tests with FLA 0.6 on three softplus cases (the 2×-FLA bar
# for the gate step's new rounding; FLA's Triton JIT runs meanwhile). Then GPU tests and same bits on st, and, once
# FLA is done, P1-P6 (softplus) gs vs st, two rounds.
LIBS="gs st"
. experiments/2026-12-02-tf32/ab3.sh
FC=T2048-kimi-softplus-bf16g-H16-vf,B4-T1000-softplus-H8-kf,varlen-15-100-300-1200-2000-softplus-bf16g-vf
( timeout 420 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu --fla-cases $FC \
    --chunk-library $(lib gs) -p no:cacheprovider -k matches_reference --results-dir $O/acc_fla > $O/gpu_fla.log 2>&1;
  echo "fla rc $?" >> $O/gpu_fla.log ) &
FLA=$!
gpu_tests st; el
same_bits gs st; el
wait $FLA; el fla done; tail -2 $O/gpu_fla.log
bench P 2; el
mkdir -p $OUT/o
{ cat $O/gpu_fla.log; cat $O/acc_fla/*.md; } > $OUT/o/fla.log 2>&1
cat $O/gpu_st.log $O/P_*.log > $OUT/o/st.log
