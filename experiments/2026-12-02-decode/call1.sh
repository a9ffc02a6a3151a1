#!/usr/bin/env bash
# Device call 1 (H200): the L2 prefetch of a one-tile recurrent kernel's state tile ahead of griddepcontrol.wait,
# now only in grids of at most one CTA per SM (%nsmid), against the build before it (build/_ab/vA.tar.xz):
# recurrent GPU tests on the new build, decode shapes old / new alternating, two rounds; then where M1's time goes
# (ncu, full set, the routed multi-token kernels of both layouts and D2's k_first kernel for contrast).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
tar xJf build/_ab/vA.tar.xz -C /tmp/ab && tar xJf build/_ab/vB.tar.xz -C /tmp/ab || exit 3
OLD=/tmp/ab/_vA/kimi_linear_recurrent
NEW=/tmp/ab/_vB/kimi_linear_recurrent
el "recurrent GPU tests (new)"
KDA2_LIBRARY=$NEW timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR" $O/gpu_recurrent.log | head -12
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s")
for x in d["rows"]:
    print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
}
for r in 1 2; do for lib in old new; do
  V=$OLD; [ $lib = new ] && V=$NEW
  el "bench round $r $lib"
  timeout 80 python3 -m kda2.bench recurrent --no-fla --library $V --shapes D1,D2,D3,M1 --out $O/dec_${lib}_$r \
    > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
done; done
NCU=$(command -v ncu)
for job in "M1 k_first" "M1 v_first" "D2 k_first"; do
  set -- $job
  el "ncu $1 $2"
  timeout 120 $NCU --kernel-name regex:kda2_recurrent --launch-skip 3 --launch-count 1 --set full --import-source yes \
    -o $O/ncu_$1_$2 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes $1 --layouts $2 --quick \
    --out $O/b_$1_$2 > $O/ncu_$1_$2.log 2>&1
  echo "rc $?"; tail -1 $O/ncu_$1_$2.log
  $NCU -i $O/ncu_$1_$2.ncu-rep --page details > $O/ncu_$1_$2_details.txt 2>&1
  $NCU -i $O/ncu_$1_$2.ncu-rep --page source --csv --print-source sass > $O/ncu_$1_$2_sass.csv 2>&1
  grep -E "^  [a-z]|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Eligible Warps|Issued Warp|Warp Cycles Per Issued|Block Size|Grid Size|Shared Memory Config|Dynamic Shared|Block Limit" \
    $O/ncu_$1_$2_details.txt | head -24
done
el done
rm -f $O/dec_*/*.png $O/b_*/*.png
tar czf $OUT/call1.tgz -C /tmp o --exclude='*.ncu-rep'
