#!/usr/bin/env bash
# Device call 1 (H200), carry ["build/_ab/new64b.tar.xz", "build/_ab/rec_head.tar.xz", "build/_ab/vall.tar.xz"]:
# 1) experiments/2026-12-04-k64/call4.sh: the split GPU tests and the 105-shape grid on the K = 64 library with the
#    split rule's 8-chunk segments; 2) ncu (full set, per-SASS samples) of HEAD's routed M1 kernels (N = 64, T = 4),
#    both layouts, one call each: where a CTA's time goes (issue 13, M1); 3) the calls without library= on the six
#    default specs vendored side by side (tests/gpu/test_default_library_gpu.py: chunk_kda took no head dims before).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
bash experiments/2026-12-04-k64/call4.sh
O=/tmp/p; rm -rf $O; mkdir -p $O
tar xJf build/_ab/rec_head.tar.xz -C /tmp || exit 3
L=/tmp/vrec/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for lay in k_first v_first; do
  timeout 120 $NCU --kernel-name regex:kda2 --launch-skip 3 --launch-count 1 --set full --import-source yes \
    -o $O/m1_$lay python3 experiments/2026-12-02-ring/one_call.py $L $lay 64 4 4 > $O/m1_$lay.log 2>&1
  echo "ncu $lay rc $?"; tail -1 $O/m1_$lay.log
  $NCU -i $O/m1_$lay.ncu-rep --page details > $O/m1_${lay}_details.txt 2>&1
  $NCU -i $O/m1_$lay.ncu-rep --page source --csv --print-source sass > $O/m1_${lay}_sass.csv 2>&1
  grep -E "^  [a-z_0-9]+ |Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|DRAM Throughput|Block Limit|Dynamic Shared" \
    $O/m1_${lay}_details.txt | head -20
  python3 experiments/2026-12-02-ring/sass_agg.py $O/m1_${lay}_sass.csv 12 | head -40
done
tar xJf build/_ab/vall.tar.xz -C /tmp || exit 3
KDA2_BUILD_DIR=/tmp/vall timeout 300 python3 -m pytest -m gpu tests/gpu/test_default_library_gpu.py -q --require-gpu \
  -p no:cacheprovider -rs > $O/default_lib.log 2>&1; echo "default-library tests rc $?"; tail -3 $O/default_lib.log
gzip $O/*_sass.csv
tar czf $OUT/m1prof.tgz -C /tmp p
