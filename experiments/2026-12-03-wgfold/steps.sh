# Sourced by call4.sh / call5.sh after ../2026-12-03-peers/dev.sh (moved here after call 4 ran: the same commands).
X=experiments/2026-12-03-wgfold/split_bench.py
declare -A NEW=([64]=build/small_head_chunk/sm_90a [128]=build/kimi_linear_chunk/sm_90a [256]=build/large_head_chunk/sm_90a)
# gpu_summary NAME...: each log's last line and its failures
gpu_summary() {
  wait; cat $O/rcs.txt
  for f in "$@"; do echo "$f: $(tail -1 $O/$f.log)"; grep -E "^FAILED|^ERROR|^E  " $O/$f.log | head -6; done
}
# split_choices: split_bench.py's timings, HEAD's vendored build ($V) vs this one; the library's choice and unsplit
split_choices() {
  el "split choices"
  timeout 200 python3 $X time $O/split.json old=$V/kimi_linear_chunk new=${NEW[128]} > $O/split.log 2>&1
  echo "time rc $?"
  grep -E '"split": "auto"|"split": 1,' $O/split.log | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(r['shape'], r['lib'], r['split'], r.get('ms'))"
}
