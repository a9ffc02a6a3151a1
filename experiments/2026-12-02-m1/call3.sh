#!/usr/bin/env bash
# Device call 3 (H200): the k_map = all preload kernels in blocks of 2 tokens (recurrent.cuh BLOCK_FORM) — the
# recurrent GPU tests on the new routed Kimi library (multi-token with per-token states, every preload candidate
# forced, pool, graph replay), then the M1 routes forced at N = 64, T = 1, 2, 4, 8 (tokens.py), old and new
# alternating, two rounds, and D2 / M1 routed.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/old /tmp/new
tar xJf build/_ab/rec.tar.xz -C /tmp/old && tar xJf build/_ab/rec_new.tar.xz -C /tmp/new || exit 3
OLD=/tmp/old/build/kimi_linear_recurrent/sm_90a/manifest.json; NEW=/tmp/new/build/kimi_linear_recurrent/sm_90a/manifest.json
KDA2_LIBRARY=$NEW timeout 240 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py \
  -q --require-gpu --fla-recurrent=none -rs -p no:cacheprovider -x > $O/gpu_recurrent.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_recurrent.log; grep -E "^FAILED|^ERROR|Error" $O/gpu_recurrent.log | head -8
el bench
for r in 1 2; do for lib in old new; do
  L=/tmp/$lib/build/kimi_linear_recurrent/sm_90a/manifest.json
  timeout 120 python3 experiments/2026-12-02-m1/tokens.py $O/t_${lib}_$r $L d5e2e307b97b 76ee8257a276 > $O/t_${lib}_$r.log 2>&1
  timeout 60 python3 -m kda2.bench recurrent --no-fla --library $L --shapes D2,M1 --out $O/d_${lib}_$r > $O/d_${lib}_$r.log 2>&1
done; done
python3 experiments/2026-12-02-m1/summary.py $O | sort
el done
rm -f $O/*/*.png; cp -r $O $OUT/
