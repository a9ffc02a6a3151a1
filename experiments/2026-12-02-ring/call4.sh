#!/usr/bin/env bash
# Device call 4 (H200): the persistent kernels split a tile index without 64-bit divisions (split_head), and the preload
# kernels prefetch A_log / dt_bias into L1 (prefetch_gate_params). vN.tar.xz: the routed Kimi recurrent library with
# them; vH.tar.xz: fb88d30's. GPU tests on vN, then the decode shapes alternating, two rounds; ncu of the M1 kernels.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab/_vH /tmp/ab/_vN
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for t in vH vN; do tar xJf build/_ab/$t.tar.xz -C /tmp/ab/_$t || exit 3; done
OLD=/tmp/ab/_vH/kimi_linear_recurrent
NEW=/tmp/ab/_vN/kimi_linear_recurrent
el "recurrent GPU tests (new routed build)"
KDA2_LIBRARY=$NEW timeout 220 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
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
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for c in "m1_kf k_first 64 4" "m1_vf v_first 64 4"; do set -- $c
  timeout 60 $NCU --kernel-name regex:kda2 --launch-skip 3 --launch-count 1 --set full --import-source yes \
    -o $O/$1 python3 experiments/2026-12-02-ring/one_call.py $NEW $2 $3 $4 4 > $O/$1.log 2>&1
  $NCU -i $O/$1.ncu-rep --page details > $O/$1_details.txt 2>&1
  $NCU -i $O/$1.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $O/$1_sass.csv.gz
  echo "ncu $1"; grep -E "^  [a-z_0-9]+ |Duration|Registers Per|Issued Warp|DRAM Throughput|Executed Instructions  " $O/$1_details.txt | head -8
  rm -f $O/$1.ncu-rep
done
el done
rm -f $O/dec_*/*.png
tar czf $OUT/call4.tgz -C /tmp o
