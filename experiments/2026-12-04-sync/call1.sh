#!/usr/bin/env bash
# Device call 1 (H200): the prep with fewer CTA barriers (bar.patch: no barrier after a tensor-copied gate's wait, the
# l2norm straight after q / k's wait writing the zeros of rows past the sequence, the scan's hand-over by bar.arrive /
# bar.sync) and a warp-local copy-out of step 6 (s6local.patch, on bar). The working tree's three chunk specs
# (bar + s6local) vendored to build/_ab/n_<spec>, bar alone at K = 128 to build/_ab/v_bar, HEAD's to v_base / v_b64 /
# v_b256, HEAD's recurrent library to v_rec. Bits against HEAD and the chunk GPU tests (with the overlap module) at
# K = 64, 128, 256 (pipes/call3.sh, TESTS_ONLY), beside them the recurrent GPU tests on HEAD's library (its host
# tensor-map encoder was refactored in 7c744b3 and not yet run); then HEAD, bar and bar + s6local alternating, two
# rounds. Carry build/_ab.
. experiments/2026-12-04-sync/lib.sh
link_new
( sleep 20; KDA2_LIBRARY=$PWD/build/_ab/v_rec/kimi_linear_recurrent/sm_90a timeout 400 python3 -m pytest -m gpu \
    tests/gpu/test_recurrent_gpu.py tests/gpu/test_recurrent_matrix_gpu.py -q --fla-recurrent none -rs \
    -p no:cacheprovider > /tmp/rec_gpu.log 2>&1; echo "recurrent rc $? $(tail -1 /tmp/rec_gpu.log)" > /tmp/rec_rc.txt ) &
tests_new call1
wait; cp /tmp/rec_gpu.log /tmp/rec_rc.txt $O/; cat $O/rec_rc.txt
ab_bench 2 old=build/_ab/v_base/kimi_linear_chunk/sm_90a bar=build/_ab/v_bar/kimi_linear_chunk/sm_90a \
  new=build/_ab/n_kimi_linear_chunk/kimi_linear_chunk/sm_90a
ab_table 2 "old:HEAD ms" "bar:bar ms" "new:bar + s6local ms"
tar czf $OUT/call1.tgz -C /tmp o
