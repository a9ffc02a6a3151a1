#!/usr/bin/env bash
# Device call 2 (H200): the ring (persistent bulk staging, recurrent.cuh ring). build/_ab/vRX.tar.xz: every candidate
# of an experiment spec (the Kimi decode buckets' bulk candidates, 16-column tiles, and their ring twins: 24 kernels);
# vH.tar.xz: HEAD's routed Kimi recurrent library. GPU tests on vRX (every forced persistent / bulk candidate; memcheck
# on the forced pool case), kda2 tune of vRX (every candidate per class), then the decode shapes: HEAD's routes vs the
# best ring kernels forced, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/vRX.tar.xz -C /tmp/ab || exit 3
mkdir -p /tmp/ab/_vH && tar xJf build/_ab/vH.tar.xz -C /tmp/ab/_vH || exit 3
OLD=/tmp/ab/_vH/kimi_linear_recurrent
NEW=/tmp/ab/_vRX/ring_exp
el "tune"
timeout 150 python3 -m kda2.tools.cli tune $NEW/sm_90a --tuning /tmp/tun --record $O/ring_exp.h200.json --margin 0.2 \
  --time-limit 140 --force > $O/tune.log 2>&1; echo "tune rc $?"; grep -E "us|decode-n" $O/tune.log | head -80
el "recurrent GPU tests (every candidate)"
KDA2_LIBRARY=$NEW timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider -x > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR|Error" $O/gpu_recurrent.log | head -12
el "memcheck: forced pool decode"
KDA2_LIBRARY=$NEW timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -m gpu \
  tests/gpu/test_recurrent_matrix_gpu.py -k "forced_decode_variants_pool and persistent" -q --require-gpu \
  --fla-recurrent=none -p no:cacheprovider > $O/memcheck.log 2>&1
echo "memcheck rc $?"; tail -3 $O/memcheck.log
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s")
for x in d["rows"]:
    print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
# T = 1 rings: k_first 16x2 w4 (bb.. w8 whole state), v_first 16 w4 / w8; multi-token rings with preload
for r in 1 2; do
  for pair in base 8eac244d4ade,54699d26b5f0 bb5b1edc8f13,0f599a46a748 98de0d50e800,54699d26b5f0; do
    el "bench D round $r $pair"
    if [ $pair = base ]; then
      timeout 60 python3 -m kda2.bench recurrent --no-fla --library $OLD --shapes D2,D3,M1 --out $O/d_${pair}_$r > $O/d_${pair}_$r.log 2>&1
    else
      timeout 60 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes D2,D3 --variant $pair --out $O/d_${pair}_$r > $O/d_${pair}_$r.log 2>&1
    fi && summ $O/d_${pair}_$r/bench_recurrent.json "$pair $r" || { echo "bench $pair failed"; tail -3 $O/d_${pair}_$r.log; }
  done
  for pair in 2c9dd57071e3,391eadd35ff0 763b7f968ccf,7f7fe3138d41 83db7c25adf3,391eadd35ff0; do
    el "bench M1 round $r $pair"
    timeout 60 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes M1 --variant $pair --out $O/m_${pair}_$r > $O/m_${pair}_$r.log 2>&1 \
      && summ $O/m_${pair}_$r/bench_recurrent.json "$pair $r" || { echo "bench $pair failed"; tail -3 $O/m_${pair}_$r.log; }
  done
done
el done
rm -f $O/*/*.png
tar czf $OUT/call2.tgz -C /tmp o
