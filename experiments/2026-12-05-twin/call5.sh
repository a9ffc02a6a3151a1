#!/usr/bin/env bash
# Device call 5 (H100), carry ["build/_ab/cand_fused.tar.xz", "build/_ab/routed_h100.tar.xz",
# "build/_ab/routed_h200rec.tar.xz"]: with the fused twin's varlen rule (kda2.plan.smem FUSED_MAX_IMBALANCE_PCT: an
# uneven varlen call runs on the twin's two kernels), 1) the twin's GPU tests on the every-candidate build (even calls bit
# for bit the fused check kernel's, uneven and split ones the two kernels' within the fp64 bar), 2) P3, P4, K10, P6
# through the H100-tuned routed build and the default one in one process, two rounds (call 4's comparison again).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o5; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
for t in cand_fused routed_h100 routed_h200rec; do tar xJf build/_ab/$t.tar.xz || exit 3; done
timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_fused_twin_gpu.py --chunk-library build/_candidates/kimi_linear_chunk/sm_90a/manifest.json \
  -q -s -p no:cacheprovider -rs > $O/tests.log 2>&1
echo "tests rc $?"; grep -E "passed|failed|^E  |^FAILED|uneven" $O/tests.log | head -12
for r in 1 2; do
  for lib in _h100 ""; do
    L=build/$lib/kimi_linear_chunk/sm_90a; L=${L/\/\//\/}; n=${lib:-default}
    timeout 60 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes P3,P4,K10 --gates lower_bound,softplus \
      --out $O/r$r-$n > $O/r$r-$n.log 2>&1
    echo "round $r $n rc $?"; grep -E "^\| (P|K)" $O/r$r-$n/bench_chunk.md | cut -d'|' -f2-4
  done
done
tar czf $OUT/call5.tgz -C /tmp o5
