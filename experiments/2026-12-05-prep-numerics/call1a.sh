#!/usr/bin/env bash
# Device call 1 (H200), carry ["build/_ab/vbfs.tar.xz"]: the prep_wu bfs variants on a GPU for the first time.
#   1. tests/gpu/test_wgmma_gpu.py: the blocked substitution alone (tests/kernels/bfs_check.cu, kda2/bfs.cuh bfs_solve)
#      against its rounding model and an fp64 solve; if it fails, nothing after it means anything.
#   2. the chunk GPU tests (36 cases, fp64 reference, FLA compared on none) on the bfs libraries of K = 64, 128, 256,
#      their accuracy tables to compare with the model's prediction (NOTES.md, variants.json: bfs-mixed).
#   3. the A/B: `kda2 bench chunk` on the K = 128 levels and bfs libraries (the same untuned planner routes, the knob
#      alone differs), P1-P6 both gates and K1-K10, alternating lev, bfs, lev, bfs on the same warm GPU.
# This file: steps 1-2, under $OUT/prep1.tgz (saved as it goes); call1b.sh step 3; call1c.sh both in one call.
O=/tmp/o; rm -rf $O; TGZ=prep1.tgz; . experiments/2026-12-05-prep-numerics/setup.sh
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
