#!/usr/bin/env bash
# Device call 4 (H200): u2.patch on HEAD (37e00ba), applied to the working tree's three chunk specs: bits against HEAD's
# vendored builds (v_b64, v_base = HEAD at K = 128, v_b256), chunk GPU tests at K = 64, 128, 256, then HEAD and u2
# alternating, three rounds, P1–P6 softplus and the K3 set (pipes/call3.sh; tarball call4.tgz); then ncu of one P1
# prep launch of HEAD (source counters, warp states: stall samples per SASS row; tarball call4_ncu.tgz).
# Carry build/_ab and build/{kimi_linear,small_head,large_head}_chunk.
NEW_LABEL="step 6 unrolled (u2)" CALL=call4 bash experiments/2026-12-03-pipes/call3.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o4n; rm -rf $O; mkdir -p $O
timeout 200 ncu --kernel-name regex:kda2_chunk_prep --launch-skip 1 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy --import-source yes \
  -o $O/prep_head python3 -m kda2.bench chunk --no-fla --no-cudnn --library build/_ab/v_base/kimi_linear_chunk/sm_90a \
  --shapes P1 --gates softplus --iters 2 --warmup 1 --out $O/b > $O/ncu.log 2>&1
echo "ncu rc $?"
ncu -i $O/prep_head.ncu-rep --page source --csv --print-source sass > $O/prep_head_sass.csv 2>&1
ncu -i $O/prep_head.ncu-rep --page details --csv > $O/prep_head_details.csv 2>&1
rm -f $O/prep_head.ncu-rep; gzip $O/prep_head_sass.csv
tar czf $OUT/call4_ncu.tgz -C /tmp o4n
