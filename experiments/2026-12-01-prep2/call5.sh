#!/usr/bin/env bash
# Device call 5 (H200): call 4 again with every wheel installed (its chunk accuracy tests erred: --require-gpu needs
# FLA importable, even with --fla-cases=none) and only small files kept (call 4's tarball, with the same-bits
# tensors, was over the size limit). GPU tests of the three chunk specs on this build; main / call 3's prep / this
# one alternating on P1-P6, both gates.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
OLD=build/_vend2/chunk/kimi_linear_chunk/sm_90a; P1=build/_vend3/chunk/kimi_linear_chunk/sm_90a
NEW=build/_vend4/kimi_linear_chunk/kimi_linear_chunk/sm_90a
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  el "GPU tests $s"
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
    --chunk-library build/_vend4/$s/$s/sm_90a --fla-cases=none --results-dir $O/acc_$s -rs -p no:cacheprovider > $O/gpu_$s.log 2>&1
  echo "$s rc $?"; tail -2 $O/gpu_$s.log
done
for round in 1 2; do
  for v in old p1 new; do
    el "bench $v $round"; L=$OLD; [ $v = p1 ] && L=$P1; [ $v = new ] && L=$NEW
    timeout 150 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes p --gates softplus,lower_bound \
      --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "rc $?"
  done
done
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
rm -f $O/b_*/*.png
tar czf $OUT/call5.tgz -C /tmp o; ls -la $OUT
