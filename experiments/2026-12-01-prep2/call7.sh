#!/usr/bin/env bash
# Device call 7 (H200): the split's combine with batched M-row loads and the next segment's rows prefetched into L2
# (the products in the same order: outputs must equal call 6's build bit for bit, split cases included); the split
# GPU tests on K = 64, 128, 256; old / new alternating on K7 (where the combine was 54 of 72 µs), K1 and P6; cuDNN on
# its K3 shapes against the new build.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
OLD=build/_vend4/kimi_linear_chunk/kimi_linear_chunk/sm_90a; NEW=build/_vend5/kimi_linear_chunk/kimi_linear_chunk/sm_90a
X=experiments/2026-12-01-prep2/same_bits.py
(timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "probe rc $?" >> $O/cudnn_probe.log) & W=$!
el "same bits"
python3 $X run $OLD /tmp/old.pt && python3 $X run $NEW /tmp/new.pt
python3 $X cmp /tmp/old.pt /tmp/new.pt > $O/same_bits.log 2>&1; echo "same-bits rc $?"; cat $O/same_bits.log
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "split GPU tests $s"
  timeout 100 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
    --chunk-library build/_vend5/$s/$s/sm_90a --fla-cases=none -rs -p no:cacheprovider > $O/gpu_split_$s.log 2>&1
  echo "$s rc $?"; tail -1 $O/gpu_split_$s.log
done
wait $W; tail -1 $O/cudnn_probe.log
for round in 1 2; do
  for v in old new; do
    el "bench $v $round"; L=$OLD; [ $v = new ] && L=$NEW
    timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes K7,K1,P6 --gates lower_bound \
      --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "rc $?"
  done
done
el "cuDNN K3 vs new"
timeout 100 python3 -m kda2.bench chunk --no-fla --library $NEW --shapes k3 --gates lower_bound --out $O/k3 > $O/k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10
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
    m = {k: statistics.median(x) for k, x in d.items()}
    print(f"{i:3s} {g:12s} old {' '.join(f'{x:.4f}' for x in d['old'])}  new {' '.join(f'{x:.4f}' for x in d['new'])}"
          f"  new/old {m['new'] / m['old']:.3f}")
PY
rm -f $O/*/*.png
tar czf $OUT/call7.tgz -C /tmp o; ls -la $OUT
