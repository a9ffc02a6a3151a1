#!/usr/bin/env bash
# Device call 2 (H200): the Kimi recurrent spec's every candidate with the T = 1 preload twins (all.tar.xz, sm_90a):
# recurrent GPU tests with the bulk / persistent / one-token preload variants forced, kda2 tune against the repository's
# record (the product's new record), then D1 / D2 / D3 / M1 with the old routes and the new winners forced,
# alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/all.tar.xz -C /tmp/ab || exit 3
NEW=/tmp/ab/build/_all/kimi_linear_recurrent
el "recurrent GPU tests (every candidate kind forced)"
KDA2_LIBRARY=$NEW timeout 260 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -8
el "tune"
rm -rf /tmp/tun && cp -r tuning /tmp/tun
timeout 230 python3 -m kda2.tools.cli tune $NEW/sm_90a --tuning /tmp/tun --record $O/kimi_linear_recurrent.h200.json \
  --margin 0.2 --time-limit 210 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first:" $O/tune.log | head -30
win() { grep -E "^  $1:$2 +$3:" $O/tune.log | awk '{print $3}'; }
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["rows"]:
    print(f"  {sys.argv[2]} {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.2f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
# the old routes (tuning/kimi_linear_recurrent.h200.json at the session's start) and the new winners
declare -A RUNS=([D2:k_first]="d12273ba3aeb $(win k_first 1 decode-n64)" [D2:v_first]="554e3bb662b7 $(win v_first 1 decode-n64)"
                 [D3:k_first]="2f680e623f3b $(win k_first 1 decode-n256)" [D3:v_first]="2674d2450fe7 $(win v_first 1 decode-n256)"
                 [D1:k_first]="add37fbc6a17 $(win k_first 1 decode-n1)" [D1:v_first]="079885349c53 $(win v_first 1 decode-n1)"
                 [M1:k_first]="76ee8257a276 $(win k_first 8 decode-n64)" [M1:v_first]="d5e2e307b97b $(win v_first 8 decode-n64)")
for r in 1 2; do for key in D2:k_first D2:v_first D3:k_first D3:v_first D1:k_first D1:v_first M1:k_first M1:v_first; do
  s=${key%%:*}; l=${key##*:}
  for v in $(echo ${RUNS[$key]} | tr ' ' '\n' | awk '!seen[$0]++'); do
    timeout 60 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes $s --layouts $l --variant $v \
      --out $O/b_${s}_${l}_${v}_$r > $O/b_${s}_${l}_${v}_$r.log 2>&1 && summ $O/b_${s}_${l}_${v}_$r/bench_recurrent.json "r$r $v" \
      || { echo "bench $s $l $v failed"; tail -3 $O/b_${s}_${l}_${v}_$r.log; }
  done
done; done
el done
rm -f $O/b_*/*.png
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
tar czf $OUT/call2.tgz -C /tmp o
