# Sourced by call1.sh / call2.sh after ../2026-12-03-peers/dev.sh (moved here after they ran: the same commands).
# rec_tests SECONDS [ARGS...]: the recurrent GPU tests (ARGS added) and the issue-13 matrix with FLA on every case,
# on the library $L, in parallel; the summary lines.
rec_tests() {
  local secs=$1; shift
  ( KDA2_LIBRARY=$L timeout $secs python3 -m pytest -m gpu tests/gpu/test_recurrent_gpu.py -q --require-gpu "$@" \
      -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1; echo "recurrent rc $?" >> $O/rcs.txt ) &
  ( KDA2_LIBRARY=$L timeout $secs python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py -q --require-gpu \
      --fla-recurrent=all --results-dir $O -rs -p no:cacheprovider > $O/gpu_matrix.log 2>&1
    echo "matrix rc $?" >> $O/rcs.txt ) &
  wait
  cat $O/rcs.txt
  for f in gpu_recurrent gpu_matrix; do
    echo "$f: $(tail -1 $O/$f.log)"; grep -E "^FAILED|^ERROR|^SKIPPED" $O/$f.log | head -8
  done
}
# tune_step SECONDS LIMIT LINES: `kda2 tune` of $L into $O/tuning (time limit LIMIT), the log's last LINES lines.
tune_step() {
  el "tune"
  timeout $1 python3 -m kda2.tools.cli tune $L --tuning $O/tuning --margin 0.2 --time-limit $2 > $O/tune.log 2>&1
  echo "tune rc $?"; tail -$3 $O/tune.log
  el "GPU tests: recurrent + matrix (FLA on every matrix case)"
}
