#!/usr/bin/env bash
# Device call 1 (H200), carry ["build/_ab/vbfs.tar.xz"]: the prep_wu bfs variants on a GPU for the first time.
#   1. tests/gpu/test_wgmma_gpu.py: the blocked substitution alone (tests/kernels/bfs_check.cu, kda2/bfs.cuh bfs_solve)
#      against its rounding model and an fp64 solve; if it fails, nothing after it means anything.
#   2. the chunk GPU tests (36 cases, fp64 reference, FLA compared on none) on the bfs libraries of K = 64, 128, 256,
#      their accuracy tables to compare with the model's prediction (NOTES.md, variants.json: bfs-mixed).
#   3. the A/B: `kda2 bench chunk` on the K = 128 levels and bfs libraries (the same untuned planner routes, the knob
#      alone differs), P1-P6 both gates and K1-K10, alternating lev, bfs, lev, bfs on the same warm GPU.
# Everything under $OUT/prep1.tgz (saved as it goes). call1a.sh / call1b.sh: its steps 1-2 and 3 as two calls.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
tar xJf build/_ab/vbfs.tar.xz -C /tmp || exit 3
save() { tar czf "$OUT/prep1.tgz" -C /tmp o 2>/dev/null; }
run() {  # name, timeout, pytest args...
  local n=$1 t=$2; shift 2
  mkdir -p $O/$n
  timeout "$t" python3 -m pytest -m gpu -q --require-gpu -rs -p no:cacheprovider --results-dir $O/$n "$@" \
    > $O/$n.log 2>&1
  echo "$n rc $?" >> $O/rc.txt
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee $O/gpu.txt
el "1. the substitution alone"
run wgmma 200 tests/gpu/test_wgmma_gpu.py
echo "== wgmma: $(tail -1 $O/wgmma.log)"; grep -E "^FAILED|^ERROR|Error" $O/wgmma.log | head -10; save
el "2. chunk GPU tests on the bfs libraries"
for s in kimi small large; do
  run chunk_$s 330 tests/gpu/test_chunk_gpu.py --chunk-library /tmp/vbfs/${s}_bfs_chunk --fla-cases none &
done
wait
for s in kimi small large; do echo "== chunk_$s: $(tail -1 $O/chunk_$s.log)"; grep -E "^FAILED|^ERROR" $O/chunk_$s.log | head -8; done
save
cat $O/rc.txt
el done
save
