#!/usr/bin/env bash
# Device call 4 / 5 (H200): the wgmma state pass with one uᵀ slice for all its stages (a 64-column two-stage pass now fits
# beside a prep CTA: 125472 B). Same bits as HEAD's routed library (same_bits.py, six cases); the chunk GPU tests
# (fp64 bar, split, overlap asked for / refused on every candidate) on the every-candidate build; kda2 tune of it
# (the two-stage pass may now overlap); P1-P6 softplus, HEAD's routed library vs the new one (old routes), alternating.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab /tmp/new
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=$ROOT/src
tar xJf build/_ab/all.tar.xz -C /tmp/ab && tar xJf build/_ab/new.tar.xz -C /tmp/new || exit 3
OLD=/tmp/ab/build/kimi_linear_chunk/sm_90a; NEW=/tmp/new/build/kimi_linear_chunk/sm_90a; ALL=/tmp/new/build/_all/kimi_linear_chunk/sm_90a
SB=experiments/2026-12-01-prep2/same_bits.py
python3 $SB run $OLD $O/old.pt > /dev/null && python3 $SB run $NEW $O/new.pt > /dev/null && python3 $SB cmp $O/old.pt $O/new.pt
el tests
G="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py"
timeout 200 python3 -m pytest -m gpu $G -q --require-gpu --fla-cases none --chunk-library $ALL -rs -p no:cacheprovider \
  > $O/gpu_all.log 2>&1; echo "gpu tests rc $?"; tail -1 $O/gpu_all.log; grep -E "^FAILED|^ERROR" $O/gpu_all.log | head -6
el tune
TUN=$O/tuning; cp -r tuning $TUN
timeout 150 python3 -m kda2.tools.cli tune $ALL --tuning $TUN --margin 0.2 --time-limit 140 --force > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first" $O/tune.log
python3 - <<'PY'
import json
d = json.load(open("/tmp/o/tuning/kimi_linear_chunk.h200.json"))
for row, r in sorted(d["routes"].items()):
    if row.startswith("v_first"):
        for vid, c in sorted(r["candidates"].items()):
            print(row, vid, c.get("classes"), c.get("pruned") or "")
PY
el ab
for r in 1 2; do for lib in $OLD $NEW; do
  timeout 40 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $lib --shapes P1,P2,P3,P4,P5,P6 --gates softplus \
    --out $O/p_$r > $O/p_$r.log 2>&1 || echo "rc $?"
  echo "$r $(echo $lib | cut -d/ -f3) $(grep -E '^ P[1-6]' $O/p_$r.log | awk '{print $1, $5}' | tr '\n' ' ')"
done; done
el done
rm -f $O/p_*/*.png
rm -f $O/*.pt; tar czf $OUT/call.tgz -C /tmp o
