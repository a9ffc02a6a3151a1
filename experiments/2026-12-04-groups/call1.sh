#!/usr/bin/env bash
# Device call 1 (H200): groups.py on HEAD's K = 128 chunk build (build/_ab/v_head, carried): P3, P4 and the varlen K3
# shapes as 1 / 2 / 4 / 8 groups on 1 / 2 / 3 streams, both gates; the library's own schedule per call, then
# overlap refused.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
X=experiments/2026-12-04-groups/groups.py; L=build/_ab/v_head/kimi_linear_chunk
O=$OUT/call1; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
timeout 150 python3 $X $L --shapes P3,P4,P1 --gate softplus --out $O/softplus.json 2>&1 | tee $O/softplus.log
timeout 120 python3 $X $L --shapes P3,K5,K10 --gate lower_bound --out $O/bounded.json 2>&1 | tee $O/bounded.log
timeout 100 python3 $X $L --shapes P3 --gate softplus --overlap off --groups 1,2,4,8,16 --streams 1,2,4 --out $O/p3_nov.json 2>&1 | tee $O/p3_nov.log
