#!/usr/bin/env bash
# Device call 6 (H200): the routed Kimi chunk library with the records of call 5's tune (the two-stage wgmma pass,
# overlapped, now serves the 65536 bucket's one-sequence class: P2, P5) — the chunk GPU tests (fp64 bar, split,
# overlap) on it and on the small-head library routed by call 1's records (its cubins are byte-identical to HEAD's:
# no wgmma candidates); P1-P6 softplus against HEAD's routed library, alternating, three rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab /tmp/new
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/all.tar.xz -C /tmp/ab && tar xJf build/_ab/new.tar.xz -C /tmp/new || exit 3
OLD=/tmp/ab/build/kimi_linear_chunk/sm_90a; NEW=/tmp/new/build/kimi_linear_chunk/sm_90a
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
timeout 120 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library $NEW --results-dir $O/acc -rs \
  -p no:cacheprovider > $O/gpu_new.log 2>&1; echo "gpu tests rc $?"; tail -1 $O/gpu_new.log; grep -E "^FAILED|^ERROR" $O/gpu_new.log | head -6
el ab
for r in 1 2 3; do for lib in $OLD $NEW; do
  timeout 40 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $lib --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
    --out $O/p_$(echo $lib | cut -d/ -f3)_$r > $O/p_$r.log 2>&1 || echo "rc $?"
  echo "$r $(echo $lib | cut -d/ -f3) $(grep -E '^ P[1-6]' $O/p_$r.log | awk '{print $1, $5}' | tr '\n' ' ')"
done; done
el small
timeout 60 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library /tmp/new/build/small_head_chunk/sm_90a \
  -rs -p no:cacheprovider > $O/gpu_small.log 2>&1; echo "small rc $?"; tail -1 $O/gpu_small.log
for r in 1 2; do for lib in /tmp/ab/build/small_head_chunk/sm_90a /tmp/new/build/small_head_chunk/sm_90a; do
  timeout 40 python3 -m kda2.bench chunk --no-fla --no-cudnn --head-dim 64 --library $lib --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/s_$(echo $lib | cut -d/ -f3)_$r > $O/s_$r.log 2>&1 || echo "rc $?"
  echo "k64 $r $(echo $lib | cut -d/ -f3) $(grep -E '^ P[1-6]' $O/s_$r.log | awk '{print $1, $5}' | tr '\n' ' ')"
done; done
el done
rm -f $O/s_*/*.png $O/p_*/*.png
tar czf $OUT/call.tgz -C /tmp o
