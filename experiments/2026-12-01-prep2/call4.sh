#!/usr/bin/env bash
# Device call 4 (H200): step 3 balanced (pair 0 computes pair 3's first two off-diagonal column tiles). It moves
# work between warps without changing an operation or its order, so its outputs must equal call 3's build bit for
# bit (same_bits.py); then the chunk GPU tests (fp64 reference) on all three chunk specs (K = 64, 128, 256), and
# main (call 3's old) / call 3's prep / this one alternating on P1-P6 with both gates, and cuDNN against this one.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/nvidia_cudnn*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
OLD=build/_vend2/chunk/kimi_linear_chunk/sm_90a; P1=build/_vend3/chunk/kimi_linear_chunk/sm_90a
NEW=build/_vend4/kimi_linear_chunk/kimi_linear_chunk/sm_90a
X=experiments/2026-12-01-prep2/same_bits.py
el "same bits"
python3 $X run $P1 $O/p1.pt && python3 $X run $NEW $O/new.pt   # (its .pt files made the tarball too big: call 5)
python3 $X cmp $O/p1.pt $O/new.pt > $O/same_bits.log 2>&1; echo "same-bits rc $?"; cat $O/same_bits.log
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "GPU tests $s"
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
    --chunk-library build/_vend4/$s/$s/sm_90a --fla-cases=none -rs -p no:cacheprovider > $O/gpu_$s.log 2>&1
  echo "$s rc $?"; tail -2 $O/gpu_$s.log
done
for round in 1 2; do
  for v in old p1 new; do
    el "bench $v $round"; L=$OLD; [ $v = p1 ] && L=$P1; [ $v = new ] && L=$NEW
    timeout 150 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes p --gates softplus,lower_bound \
      --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "rc $?"
  done
done
el "cuDNN vs new"
timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "probe rc $?"
timeout 200 python3 -m kda2.bench chunk --no-fla --library $NEW --shapes P3,P4,k3 --gates lower_bound --out $O/cudnn \
  > $O/cudnn.log 2>&1; echo "cudnn rc $?"; grep -E "^\| (P|K)" $O/cudnn/bench_chunk.md | tail -12
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
    print(f"{i:3s} {g:12s} " + "  ".join(f"{k} {' '.join(f'{x:.3f}' for x in d[k])}" for k in ("old", "p1", "new"))
          + f"  new/old {m['new'] / m['old']:.3f}  new/p1 {m['new'] / m['p1']:.3f}")
PY
tar czf $OUT/call4.tgz -C /tmp o
