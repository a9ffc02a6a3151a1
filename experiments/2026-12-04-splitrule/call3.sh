#!/usr/bin/env bash
# Device call 3 (H200): 1) kda2 tune of the every-candidate builds of the three chunk specs (the split rows timed at
# the new rule's segments); 2) the split GPU tests at K = 256 again (call 2's log did not come back); 3) the overlap
# choice around B1 T10240 H24 (overlap.py).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/new.tar.xz -C /tmp || exit 3
L=/tmp/vnew
el overlap; timeout 100 python3 experiments/2026-12-04-splitrule/overlap.py $L/kimi_linear_chunk/sm_90a/manifest.json \
  $O/overlap.json > $O/overlap.log 2>&1; echo "rc $?"; cut -c1-200 $O/overlap.log
el "split tests large_head_chunk"
timeout 100 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py -q --require-gpu --chunk-library $L/large_head_chunk/sm_90a \
  -rs -p no:cacheprovider > $O/split_large.log 2>&1; echo "rc $?"; tail -1 $O/split_large.log; grep -E "^FAILED|^ERROR|^E  " $O/split_large.log | head -20
cd /tmp/pk
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "tune $s"
  timeout 170 python3 -m kda2.tools.cli tune build/_all/$s/sm_90a --specs $OLDPWD/kernel_specs --rules $OLDPWD/rules \
    --profiles $OLDPWD/profiles --tuning $O/tuning --margin 0.2 --time-limit 150 > $O/tune_$s.log 2>&1
  echo "tune $s rc $?"; grep -E "split|wrote" $O/tune_$s.log | tail -8
done
cd $OLDPWD
el done
tar czf $OUT/call3.tgz -C /tmp o
