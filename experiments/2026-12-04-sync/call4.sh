#!/usr/bin/env bash
# Device call 4 (H200): tbeta.patch (on 284c36d) — β folded into T's columns (w = (T diag β)(k 2^Γ),
# u = (T diag β) v: step 4 no longer scales k by β nor reads and rewrites v). Not the same bits: the working tree's
# three chunk specs (build/_ab/n_<spec>) against HEAD's (v_base, v_b64, v_b256: pre-bar builds, the same bits as HEAD)
# case by case (split_bench bits / cmp: how far apart), the chunk GPU tests with the overlap module at K = 64, 128,
# 256 with their accuracy tables (acc_k*: fp64 errors to set beside call 2's), then HEAD (v_head, 284c36d's K = 128
# build) and tbeta alternating, three rounds. Carry build/_ab.
. experiments/2026-12-04-sync/lib.sh
link_new
tests_new call4
ab_bench 3 old=build/_ab/v_head/kimi_linear_chunk/sm_90a new=build/_ab/n_kimi_linear_chunk/kimi_linear_chunk/sm_90a
ab_table 3 "old:HEAD ms" "new:β in T ms"
tar czf $OUT/call4.tgz -C /tmp o
