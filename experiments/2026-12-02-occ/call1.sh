#!/usr/bin/env bash
# Device call 1 (H200): decode kernels under a 4-CTA launch bound whatever the register estimate. The occupancy
# agent's estimate for v_first tiles (152 registers for the 16-column preload tile) keeps their raised twins at three
# CTAs, yet ptxas fits that tile in 127 registers without spills. vOcc.tar.xz: an experiment spec (m1_occ.yaml:
# buckets 1 and 8, sm_90a, spills allowed so every twin builds) planned from a scratch worktree whose occupancy agent
# adds a 4-CTA twin to every 4-warp decode candidate; every candidate built. GPU tests with every candidate forced,
# kda2 tune, then D2 / M1 with today's routes and the tune's winners forced, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/vOcc.tar.xz -C /tmp/ab || exit 3
NEW=/tmp/ab/_vOcc/m1_occ
el "GPU tests (multi-token, forced candidates)"
KDA2_LIBRARY=$NEW timeout 170 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py -k "multi_token or forced" \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -6
el "tune"
rm -rf /tmp/tun && cp -r tuning /tmp/tun
timeout 170 python3 -m kda2.tools.cli tune $NEW/sm_90a --tuning /tmp/tun --record $O/m1_occ.h200.json --margin 0.2 \
  --time-limit 160 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "^  [kv]_first:" $O/tune.log | head -30
mkdir -p $O/failures && cp -r /tmp/tun/failures/. $O/failures/ 2>/dev/null
win() { grep -E "^  $1:$2 +decode-n64:" $O/tune.log | awk '{print $3}'; }
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["rows"]:
    print(f"  {sys.argv[2]} {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
declare -A RUNS=([M1:v_first]="8682bfa201af $(win v_first 8)" [M1:k_first]="76ee8257a276 $(win k_first 8)"
                 [D2:v_first]="8d9e7f1da746 $(win v_first 1)" [D2:k_first]="d12273ba3aeb $(win k_first 1)")
for r in 1 2; do for key in M1:v_first M1:k_first D2:v_first D2:k_first; do
  s=${key%%:*}; l=${key##*:}
  for v in $(echo ${RUNS[$key]} | tr ' ' '\n' | awk '!seen[$0]++'); do
    timeout 60 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes $s --layouts $l --variant $v \
      --out $O/b_${s}_${l}_${v}_$r > $O/b_${s}_${l}_${v}_$r.log 2>&1 && summ $O/b_${s}_${l}_${v}_$r/bench_recurrent.json "r$r $v" \
      || { echo "bench $s $l $v failed"; tail -3 $O/b_${s}_${l}_${v}_$r.log; }
  done
done; done
el done
rm -f $O/b_*/*.png
tar czf $OUT/call1.tgz -C /tmp o
