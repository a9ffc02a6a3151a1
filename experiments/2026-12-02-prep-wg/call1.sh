#!/usr/bin/env bash
# Device call 1 (H200): the prep's step 6 (w, u) on warpgroup MMAs in the wgmma variants. vO: 124c82a's routed Kimi
# chunk library; vW: step 6 on wgmma. The chunk GPU tests on vW (fp64 bar), vO vs vW outputs, then P1-P6 softplus,
# kda2 alone, alternating, two rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site
tar xJf build/_ab/libs.tar.xz -C /tmp/ab || exit 3
X=experiments/2026-12-01-prep2/same_bits.py
python3 $X run /tmp/ab/_vO/kimi_linear_chunk $O/a.pt > /dev/null && python3 $X run /tmp/ab/_vW/kimi_linear_chunk $O/b.pt > /dev/null && \
  python3 $X cmp $O/a.pt $O/b.pt > $O/same_bits.log 2>&1
echo "same-bits rc $?"; head -20 $O/same_bits.log; rm -f $O/*.pt
el "tests"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py \
  -q --require-gpu --fla-cases none --chunk-library /tmp/ab/_vW/kimi_linear_chunk -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_chunk.log; grep -E "^FAILED|^ERROR" $O/gpu_chunk.log | head -6
for r in 1 2; do for lib in vO vW; do
  el "bench round $r $lib"
  timeout 100 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/ab/_$lib/kimi_linear_chunk --shapes P1,P2,P3,P4,P5,P6 \
    --gates softplus --out $O/p_${lib}_$r > $O/p_${lib}_$r.log 2>&1; echo "rc $?"
  grep -E "^ P[1-6]" $O/p_${lib}_$r.log | head -6 || tail -5 $O/p_${lib}_$r.log
done; done
el done
rm -f $O/p_*/*.png
tar czf $OUT/call1.tgz -C /tmp o
