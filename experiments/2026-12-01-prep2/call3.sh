#!/usr/bin/env bash
# Device call 3 (H200): the prep with its diagonal blocks anchored at their middle row, β / gate parameters loaded
# ahead of the tiles and two l2norm rows per pass (branch prep2). GPU tests of the chunk family on it (fp64
# reference, FLA 0.6 in the same process for the error ratio), the old bundle's accuracy table on the same inputs,
# then old vs new alternating on P1-P6 with both gates, and cuDNN's fused kernel against the new one (P, K3).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
NEW=build/_vend3/chunk/kimi_linear_chunk/sm_90a; OLD=build/_vend2/chunk/kimi_linear_chunk/sm_90a
el "FLA warm-up (cases) in the background; tests without FLA meanwhile"
python3 -m kda2.bench.fla_warm --only cases > $O/fla_warm.log 2>&1 & W=$!
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
  --chunk-library $NEW --fla-cases=none -k "not matches_reference" -rs -p no:cacheprovider > $O/gpu_chunk_other.log 2>&1
echo "other rc $?"; tail -3 $O/gpu_chunk_other.log
el "wait warm-up"; wait $W; echo "warm rc $?"; tail -2 $O/fla_warm.log
el "accuracy, new (with FLA)"
timeout 240 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu --chunk-library $NEW -k matches_reference \
  --results-dir $O/acc_new -rs -p no:cacheprovider > $O/gpu_chunk_acc_new.log 2>&1
echo "acc new rc $?"; tail -3 $O/gpu_chunk_acc_new.log
el "accuracy, old (same inputs, no FLA)"
timeout 120 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu --chunk-library $OLD -k matches_reference \
  --fla-cases=none --results-dir $O/acc_old -rs -p no:cacheprovider > $O/gpu_chunk_acc_old.log 2>&1
echo "acc old rc $?"; tail -2 $O/gpu_chunk_acc_old.log
for round in 1 2; do
  for v in old new; do
    el "bench $v $round"; L=$OLD; [ $v = new ] && L=$NEW
    timeout 150 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes p --gates softplus,lower_bound \
      --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "rc $?"
  done
done
el "cuDNN vs new"
timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "probe rc $?"
timeout 200 python3 -m kda2.bench chunk --no-fla --library $NEW --shapes P3,P4,k3 --gates lower_bound --out $O/cudnn \
  > $O/cudnn.log 2>&1; echo "cudnn rc $?"; cat $O/cudnn/bench_chunk.md | grep -E "^\| (P|K)" | head -30
el done
python3 - $O <<'PY'
import json, sys, glob, statistics
o = sys.argv[1]
t = {}
for f in sorted(glob.glob(f"{o}/b_*_*/bench_chunk.json")):
    v = f.split("/")[-2].split("_")[1]
    for r in json.load(open(f))["rows"]:
        t.setdefault((r["id"], r["gate"]), {}).setdefault(v, []).append(r["kda2"]["ms_median"])
for (i, g), d in t.items():
    print(f"{i:3s} {g:12s} old {' '.join(f'{x:.3f}' for x in d.get('old', []))}  new {' '.join(f'{x:.3f}' for x in d.get('new', []))}"
          f"  new/old {statistics.median(d['new']) / statistics.median(d['old']):.3f}")
PY
tar czf $OUT/call3.tgz -C /tmp o
