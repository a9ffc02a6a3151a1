#!/usr/bin/env bash
# Device call 1 (H200): head = 34754d8's routed Kimi chunk library; tf32 = the tf32 operands without the cvt's mask
# (kda2/mma.cuh tf32_operand: the tensor cores read the upper 19 bits, so the same bits are expected); chain = a
# plain launch's prep → fold → combine → state as programmatic dependents (../2026-12-02-trail/chain.patch, on
# head, through library.cpp.j2's launch_recurrent). GPU tests on tf32 and chain, same bits vs head, then P1-P6
# (softplus) and the K3 set (bounded), the three alternating.
LIBS="head tf32 chain"
. experiments/2026-12-02-tf32/ab3.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
gpu_tests tf32; el; gpu_tests chain; el
same_bits head tf32 chain; el
bench k3 2; el
bench P 2; el
rm -f $O/*.pt; find $O -name '*.png' -delete; cp -r $O $OUT/
