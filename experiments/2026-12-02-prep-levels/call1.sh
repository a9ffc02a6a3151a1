#!/usr/bin/env bash
# Device call 1 (H200): the prep's block levels (step 5, levels 1 and 2) on tf32 tensor cores. vO: 124c82a's routed
# chunk library; vN: the levels on mma.sync m16n8k8 tf32. Chunk GPU tests of vN on all three chunk specs (Kimi with
# FLA in the same process, accuracy tables), vO's Kimi accuracy table; P1-P6 softplus and P3, P4 lower-bound, kda2
# alone, alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
tar xJf build/_ab/lv.tar.xz -C /tmp/ab || exit 3
for r in 1 2; do for lib in vO vN; do
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_$lib/kimi_linear_chunk --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1 || echo "$lib rc $?"
  echo "$r $lib $(grep -E '^ P[1-6]' $O/p_${lib}_$r.log | awk '{print $1, $5}' | tr '\n' ' ')"
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_$lib/kimi_linear_chunk --shapes P3,P4 \
    --gates lower_bound --out $O/lb_${lib}_$r > $O/lb_${lib}_$r.log 2>&1 || echo "$lib rc $?"
  echo "$r $lib lower_bound $(grep -E '^ P[1-6]' $O/lb_${lib}_$r.log | awk '{print $1, $5}' | tr '\n' ' ')"
done; done
el "tests"
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
timeout 330 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases all --results-dir $O/acc_vN --chunk-library /tmp/ab/_vN/kimi_linear_chunk \
  -rs -p no:cacheprovider > $O/gpu_kimi_vN.log 2>&1; echo "kimi vN rc $?"; tail -1 $O/gpu_kimi_vN.log; grep -E "^FAILED|^ERROR" $O/gpu_kimi_vN.log | head -6
el "vO"
timeout 120 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu --fla-cases none --results-dir $O/acc_vO --chunk-library /tmp/ab/_vO/kimi_linear_chunk \
  -rs -p no:cacheprovider > $O/gpu_kimi_vO.log 2>&1; echo "kimi vO rc $?"; tail -1 $O/gpu_kimi_vO.log
for s in small_head_chunk large_head_chunk; do
  timeout 150 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library /tmp/ab/_vN/$s -rs -p no:cacheprovider > $O/gpu_$s.log 2>&1
  echo "$s rc $?"; tail -1 $O/gpu_$s.log; grep -E "^FAILED|^ERROR" $O/gpu_$s.log | head -4
done
el done
rm -f $O/p_*/*.png $O/lb_*/*.png
tar czf $OUT/call1.tgz -C /tmp o
