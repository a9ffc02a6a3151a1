#!/usr/bin/env bash
# Device call 2 (H200): k_map=all preload kernels now read fp32 q̂/k̂ rows from the prepared table (not 16-bit copies
# widened per element per token). The recurrent GPU tests on the three recurrent libraries with preload kernels
# (kimi K=128, small_head K=64, large_head K=256; every multi-token candidate by index, fp64 reference), kda2 tune of
# the kimi library, the decode benchmark old (main) vs new (routes from call 1's tune), alternating, three rounds, and
# ncu of the two M1 (N=64, T=4) kernels the new library routes to.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vend/rec_new/kimi_linear_recurrent/sm_90a; OLD=build/_vend/rec_old/kimi_linear_recurrent/sm_90a
for L in $NEW build/_vend/small/small_head_recurrent/sm_90a build/_vend/large/large_head_recurrent/sm_90a; do
  n=$(basename $(dirname $L)); el "recurrent GPU tests $n"
  KDA2_LIBRARY=$L timeout 150 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
    -q --require-gpu --fla-recurrent=none -k "not compute_sanitizer" -rs -p no:cacheprovider > $O/gpu_$n.log 2>&1
  echo "$n tests rc $?"; tail -1 $O/gpu_$n.log; grep -E "^FAILED|^ERROR" $O/gpu_$n.log | head -10
done
summ() { python3 - "$@" <<'PY'
import json, sys
path, tag = sys.argv[1:3]
d = json.load(open(path))
print(tag, " | ".join(f"{x['id']}/{x['layout']} {x['ms_median'] * 1e3:.1f}us g{x['graph_us']:.1f} {x.get('pct_copy', 0):.0f}%"
                     for x in d["rows"]))
PY
}
for r in 1 2 3; do for lib in old new; do
  V=$OLD; [ $lib = new ] && V=$NEW
  el "bench round $r $lib"
  timeout 100 python3 -m kda2.bench recurrent --no-fla --library $V --shapes M1,D2 --out $O/dec_${lib}_$r \
    > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -5 $O/dec_${lib}_$r.log; }
done; done
for lay in v_first k_first; do
  el "ncu M1 $lay"
  timeout 120 ncu --kernel-name regex:kda2_recurrent_ --launch-skip 3 --launch-count 1 --set full \
    python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes M1 --layouts $lay --quick --out $O/ncu_$lay \
    > $O/ncu_m1_$lay.txt 2>&1; echo "ncu rc $?"; grep -E "kda2_recurrent_|Duration|Registers Per|Achieved Occupancy|Memory Throughput|DRAM Throughput|Compute \(SM\)" $O/ncu_m1_$lay.txt | head -12
done
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 240 python3 -m kda2.tools.cli tune $NEW --tuning $TUN --margin 0.2 --time-limit 220 > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first:[18] |wrote|candidates, |rror" $O/tune.log | head -40
el done
tar czf $OUT/call2.tgz -C /tmp o
