#!/usr/bin/env bash
# Device call 3 (H200), carry ["build/_ab/new64.tar.xz", ".whl"]: the routed K = 64 library with the warpgroup-MMA
# state pass (tuning/small_head_chunk.h200.json of 2026-12-05) 1) against FLA 0.6 on six accuracy cases (both bars:
# fp64 and 2x FLA's error), FLA's option sets compiled first in parallel processes, the other cases against fp64
# only; 2) the few-chain grid of call 1 (105 shapes, forced splits 1-16 against the library's choice) on these routes.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
save() { tar czf $OUT/call3.tgz -C /tmp o 2>/dev/null; }
tar xJf build/_ab/new64.tar.xz -C /tmp || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton FLA_FLASH_KDA=0
NEW=/tmp/vnew64/small_head_chunk/small_head_chunk/sm_90a
C=T500-softplus-nofinal-scale-kf,varlen-15-100-300-1200-2000-softplus-bf16g-vf,fp16-T1000-lowerbound-betaf16-gva2-vf
C=$C,T1500-softplus-negeig-gva2-kf,stress-g-20-precomputed-kf,B4-T1000-softplus-H8-kf
el "FLA warm-up (6 cases, K = 64) beside the grid"
( timeout 200 python3 -m kda2.bench.fla_warm --cases $C --head-dims 64 > $O/fla_warm.log 2>&1; echo "warm rc $?" >> $O/rc.txt ) &
G=""; for t in 2048 3072 4096 5120 6144 8192 12288 16384 32768; do for h in 1 2 3 4 6 8 12 16 20 24 32; do
  G="$G B1T${t}H$h"; done; done
G="$G B2T4096H8 B2T8192H4 B4T4096H4 B2T16384H8 B2T4096H16 B4T8192H4"
timeout 150 python3 experiments/2026-12-04-k64/grid.py $NEW/manifest.json $O/grid64_new.json $G > $O/grid64_new.log 2>&1
echo "grid rc $?" >> $O/rc.txt; save
wait; cat $O/rc.txt
el "chunk GPU tests at K = 64, FLA on the six"
timeout 150 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py -q --require-gpu --chunk-library $NEW --fla-cases $C \
  --results-dir $O/acc -rs -p no:cacheprovider > $O/gpu_fla64.log 2>&1; echo "tests rc $?"; tail -1 $O/gpu_fla64.log
grep -E "^FAILED|^ERROR" $O/gpu_fla64.log | head; grep -E "$(echo $C | tr , '|')" $O/acc/chunk-accuracy.md 2>/dev/null | head -8
el done; save
