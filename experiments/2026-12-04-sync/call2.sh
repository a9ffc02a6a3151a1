#!/usr/bin/env bash
# Device call 2 (H200): bar.patch alone (what lands): the working tree's three chunk specs vendored to
# build/_ab/n_<spec>; bits against HEAD's (v_base, v_b64, v_b256) and the chunk GPU tests with the overlap module at
# K = 64, 128, 256 (pipes/call3.sh, TESTS_ONLY); then HEAD, bar and noload (bar + noload.patch: no tile copies,
# timing only, outputs wrong: what the loads cost the item) alternating, two rounds. Carry build/_ab.
. experiments/2026-12-04-sync/lib.sh
link_new
tests_new call2
ab_bench 2 old=build/_ab/v_base/kimi_linear_chunk/sm_90a bar=build/_ab/n_kimi_linear_chunk/kimi_linear_chunk/sm_90a \
  noload=build/_ab/v_noload/kimi_linear_chunk/sm_90a
ab_table 2 "old:HEAD ms" "bar:bar ms" "noload:noload ms (outputs wrong)"
tar czf $OUT/call2.tgz -C /tmp o
