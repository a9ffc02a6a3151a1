# Sourced by this folder's device calls (run from the repository root on the device): $O the output folder, `el`
# elapsed seconds, and the steps the calls share. (Moved here from call1.sh – call3.sh after they ran: the same commands.)
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
unpack() { tar xJf build/_ab/$1.tar.xz -C /tmp/ab || exit 3; }
# recurrent GPU tests (every forced kind, the routed variants) on library $1
rec_tests() {
  el "recurrent GPU tests ($1)"
  KDA2_LIBRARY=$1 timeout 260 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
    -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
  echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -8
}
# kda2 tune of library $1 into the record $O/$2 (against a copy of the repository's tuning/)
tune() {
  el "tune"
  rm -rf /tmp/tun && cp -r tuning /tmp/tun
  timeout 230 python3 -m kda2.tools.cli tune $1/sm_90a --tuning /tmp/tun --record $O/$2 --margin 0.2 --time-limit 210 \
    --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first:" $O/tune.log | head -30
}
# the tune's winner of layout $1, bucket $2, class $3
win() { grep -E "^  $1:$2 +$3:" $O/tune.log | awk '{print $3}'; }
# one line per row of bench JSON $1, tagged $2
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["rows"]:
    print(f"  {sys.argv[2]} {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.2f} us, graph {x.get('graph_us') or 0:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
# one forced-variant bench: $O/b_$1 (JSON and log), its summary line tagged $2; library $3, shape $4, layout $5,
# variant $6
bench_one() {
  timeout 60 python3 -m kda2.bench recurrent --no-fla --library $3 --shapes $4 --layouts $5 --variant $6 \
    --out $O/b_$1 > $O/b_$1.log 2>&1 && summ $O/b_$1/bench_recurrent.json "$2" \
    || { echo "bench $4 $5 $6 ($1) failed"; tail -3 $O/b_$1.log; }
}
# two rounds, alternating: for each "SHAPE:LAYOUT" key of the caller's RUNS (its variants, space-separated), each
# variant forced on library $1
bench_runs() {
  local lib=$1 r key s l v; shift
  for r in 1 2; do for key in "$@"; do
    s=${key%%:*}; l=${key##*:}
    for v in $(echo ${RUNS[$key]} | tr ' ' '\n' | awk '!seen[$0]++'); do
      bench_one ${s}_${l}_${v}_$r "r$r $v" $lib $s $l $v
    done
  done; done
}
# two rounds, alternating: for each "SHAPE:LAYOUT" key, the caller's ROUTE[key] (HEAD's route) in library $1 (HEAD's
# build), the same variant in library $2 (the new build) and the tune's winner there (win, by the caller's CLS[SHAPE])
# where it differs
ab_routes() {
  local old=$1 new=$2 r key s l v w run tag lib x; shift 2
  for r in 1 2; do for key in "$@"; do
    s=${key%%:*}; l=${key##*:}; v=${ROUTE[$key]}; w=$(win $l ${CLS[$s]})
    for run in "head $old $v" "new $new $v" "win $new $w"; do
      read -r tag lib x <<< "$run"
      [ -z "$x" ] && continue
      [ $tag = win ] && [ "$x" = "$v" ] && continue
      bench_one ${s}_${l}_${tag}_$r "r$r $tag $x" $lib $s $l $x
    done
  done; done
}
# two rounds, alternating: `kda2 bench recurrent --no-fla` on shapes $1 (comma-separated) for each library
# build/_ab/<name>/kimi_linear_recurrent named after it: $O/dec_<name>_<round> (JSON and log), a summary line per row
# tagged "<name> <round>"
bench_libs() {
  local shapes=$1 r lib; shift
  for r in 1 2; do for lib in "$@"; do
    el "bench round $r $lib"
    timeout 90 python3 -m kda2.bench recurrent --no-fla --library build/_ab/$lib/kimi_linear_recurrent --shapes $shapes \
      --out $O/dec_${lib}_$r > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
      || { echo "bench $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
  done; done
}
# $O as one file (the device returns at most eight)
finish() { el done; rm -f $O/*/*.png; tar czf $OUT/$1.tgz -C /tmp o; }
