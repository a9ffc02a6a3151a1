#!/usr/bin/env bash
# Device call 1 (H200): the default small_head_recurrent (K = V = 64) widened to both state layouts and every gate
# mode, built on the CPU host (build/small_head_recurrent, carried), then the recurrent GPU tests and the issue-13
# matrix with FLA 0.6.0's fused_recurrent_kda on every case. Ran on the routed build: its `kda2 tune` refused it (tuning
# times every candidate), so call 2 repeats both on the every-candidate build. Setup (wheels, $O, el, finish):
# ../2026-12-03-peers/dev.sh.
. experiments/2026-12-03-peers/dev.sh
L=build/small_head_recurrent/sm_90a
el "tune"
timeout 150 python3 -m kda2.tools.cli tune $L --tuning $O/tuning --margin 0.2 --time-limit 120 > $O/tune.log 2>&1
echo "tune rc $?"; tail -4 $O/tune.log
el "GPU tests: recurrent + matrix (FLA on every matrix case)"
( KDA2_LIBRARY=$L timeout 400 python3 -m pytest -m gpu tests/gpu/test_recurrent_gpu.py -q --require-gpu \
    --fla-recurrent=all -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent rc $?" >> $O/rcs.txt ) &
( KDA2_LIBRARY=$L timeout 400 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py -q --require-gpu \
    --fla-recurrent=all --results-dir $O -rs -p no:cacheprovider > $O/gpu_matrix.log 2>&1
  echo "matrix rc $?" >> $O/rcs.txt ) &
wait
cat $O/rcs.txt
for f in gpu_recurrent gpu_matrix; do echo "$f: $(tail -1 $O/$f.log)"; grep -E "^FAILED|^ERROR|^SKIPPED" $O/$f.log | head -8; done
cut -d'|' -f2-9 $O/recurrent-accuracy.md | head -40
finish call1
