#!/usr/bin/env bash
# Device call 2 (H200): tf32 = 19fef8d's routed Kimi chunk library (call 1's tf32); gate = the prep's gate step with
# the softplus scale folded (z = x·log2 e + bias·log2 e; −exp(A_log) applied once to the scanned sums) and no per-row
# test on whole chunks (not the same bits: the rounding order moves); gs = gate plus the diagonal blocks' left
# factors anchored at r for channels left out (no selects on the left operands: the same bits as gate expected).
# GPU tests (fp64 bar) on gate and gs, same bits tf32 vs gate vs gs, then P1-P6 (softplus) and the K3 set.
LIBS="tf32 gate gs"
. experiments/2026-12-02-tf32/ab3.sh
gpu_tests gate; el; gpu_tests gs; el
same_bits tf32 gate gs; el
same_bits gate gs; el
bench P 2; el
bench k3 1; el
rm -f $O/*.pt; find $O -name '*.png' -delete; mkdir -p $OUT/o; cp $O/*.log $OUT/o/
