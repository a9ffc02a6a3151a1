#!/usr/bin/env bash
# Device call 9 (H200): the overlapped state pass as its own instantiation (template OV), the plain one as before
# the overlap. Call 2's build (ABI 4, main's runtime) and this one (h) alternating on P1-P6, both gates, three rounds;
# then the overlap GPU test on this build (every variant overlapped vs plain: same bits) and overlap.py's timings.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
for round in 1 2 3; do
  for v in old h; do
    if [ $v = old ]; then PP=$ROOT/build/_oldsrc; L=build/_vendD/kimi_linear_chunk/kimi_linear_chunk/sm_90a
    else PP=$ROOT/src; L=build/_vendH/kimi_linear_chunk/kimi_linear_chunk/sm_90a; fi
    PYTHONPATH=$PP timeout 120 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes p \
      --gates softplus,lower_bound --out $O/b_${v}_$round > $O/b_${v}_$round.log 2>&1; echo "$v $round rc $?"
  done
done
PYTHONPATH=$ROOT/src python3 experiments/2026-12-01-prep3/ab.py $O old h | tee $O/ab.txt
rm -f $O/b_*/*.png
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site build/_whl/*.whl || exit 3
PYTHONPATH=$ROOT/src:/tmp/site timeout 100 python3 -m pytest -m gpu tests/gpu/test_chunk_overlap_gpu.py -q --require-gpu \
  --chunk-library build/_vendH/kimi_linear_chunk/kimi_linear_chunk/sm_90a -p no:cacheprovider > $O/gpu_overlap.log 2>&1
echo "overlap test rc $?"; tail -1 $O/gpu_overlap.log
PYTHONPATH=$ROOT/src timeout 120 python3 experiments/2026-12-01-prep3/overlap.py build/_vendH/kimi_linear_chunk/kimi_linear_chunk/sm_90a \
  $O/overlap.json > $O/overlap.log 2>&1; echo "overlap.py rc $?"
grep -v Warning $O/overlap.log | python3 -c "
import json,sys
for l in sys.stdin:
    try: r=json.loads(l)
    except Exception: continue
    print(r['shape'], r['variant'], 'same' if r['same_bits'] else 'DIFF', f\"{r['ms_off']:.3f} -> {r['ms_on']:.3f}\")"
tar czf $OUT/call9.tgz -C /tmp o
