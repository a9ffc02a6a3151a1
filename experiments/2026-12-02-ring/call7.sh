#!/usr/bin/env bash
# Device call 7 (H200): multi-token decode (M1) kernels under a 4-CTA launch bound. With the gate on the SFU the
# 16-column preload kernels fit 128 registers (ptxas, no spills) but the occupancy agent's estimate (+16 headroom)
# proposes three CTAs; vO4.tar.xz: an experiment spec's multi-token bucket (o4_exp.yaml), planned with headroom 0 and
# without rules 0003 / 0013 (a scratch worktree), every candidate built. GPU tests on it, kda2 tune, then M1 with the
# route (ec8b090bcce7) and the 4-CTA twins forced, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/vO4.tar.xz -C /tmp/ab || exit 3
NEW=/tmp/ab/_vO4/o4_exp
el "recurrent GPU tests (every candidate)"
KDA2_LIBRARY=$NEW timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider -x > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -6
el "tune"
timeout 120 python3 -m kda2.tools.cli tune $NEW/sm_90a --tuning /tmp/tun --record $O/o4_exp.h200.json --margin 0.2 \
  --time-limit 100 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "us \(model|decode-n" $O/tune.log | sed 's/prefetch=False //' | head -40
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["rows"]:
    print(f"  {sys.argv[2]} {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do for v in ec8b090bcce7 76ee8257a276 e2afb2ac0aaa 40e4c9da6e7b; do
  timeout 60 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes M1 --layouts k_first --variant $v \
    --out $O/m_${v}_$r > $O/m_${v}_$r.log 2>&1 && summ $O/m_${v}_$r/bench_recurrent.json "$v r$r" \
    || { echo "bench $v failed"; tail -3 $O/m_${v}_$r.log; }
done; done
el done
rm -f $O/m_*/*.png
tar czf $OUT/call7.tgz -C /tmp o
