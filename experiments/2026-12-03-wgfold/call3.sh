#!/usr/bin/env bash
# Device call 3 (H200): the exact split on the warpgroup-MMA state pass (chunk.cuh state_wg FOLD / segments), built
# on the CPU host (build/{kimi_linear,small_head}_chunk, carried), against HEAD's vendored build before it ($V, from
# ../2026-12-03-peers/dev.sh). 1) unsplit calls: the same bits as before. 2) the split GPU tests (split vs unsplit,
# both at the fp64 bar) at K = 128 and 64, now on the routed wgmma variants. 3) timings of the split choices on
# few-chain shapes, old and new library (split_bench.py).
. experiments/2026-12-03-peers/dev.sh
NEW=build/kimi_linear_chunk/sm_90a; OLD=$V/kimi_linear_chunk; X=experiments/2026-12-03-wgfold/split_bench.py
el "same bits (unsplit)"
python3 $X bits $OLD $O/old.pt && python3 $X bits $NEW $O/new.pt && python3 $X cmp $O/old.pt $O/new.pt > $O/bits.txt 2>&1
echo "bits rc $?"; cat $O/bits.txt; rm -f $O/*.pt
el "split GPU tests K=128, K=64 (+ overlap module at K=128)"
( timeout 300 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py -q \
    --require-gpu --chunk-library $NEW --fla-cases none -rs -p no:cacheprovider > $O/split128.log 2>&1
  echo "K=128 rc $?" >> $O/rcs.txt ) &
( timeout 300 python3 -m pytest -m gpu tests/gpu/test_chunk_split_gpu.py -q --require-gpu \
    --chunk-library build/small_head_chunk/sm_90a --fla-cases none -rs -p no:cacheprovider > $O/split64.log 2>&1
  echo "K=64 rc $?" >> $O/rcs.txt ) &
wait; cat $O/rcs.txt
for f in split128 split64; do echo "$f: $(tail -1 $O/$f.log)"; grep -E "^FAILED|^ERROR|Error" $O/$f.log | head -6; done
el "timings"
timeout 300 python3 $X time $O/split.json old=$OLD new=$NEW > $O/split.log 2>&1; echo "time rc $?"
python3 - $O/split.json <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
for r in rows:
    print(f"{r['shape']:10s} {r['lib']:3s} split {str(r['split']):4s} " + (f"{r['ms']:.4f} ms  o {r['err_o']:.1e} ht {r['err_ht']:.1e} {'' if r['finite'] else 'NONFINITE'}" if 'ms' in r else r['error']))
PY
finish call3
