#!/usr/bin/env bash
# Device call 3 (H200): the overlapped chunk launch (the state pass beside the prep; docs/DESIGN.md §1). Its plain
# path first: same bits as main on the K = 128 chunk library, and the chunk GPU tests; then overlap.py: for the
# variants that fit beside the prep, outputs with the overlap asked for and refused (same bits, poisoned outputs,
# fp64 reference on the small cases) and both modes' times, the routed variant's beside them.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=$ROOT/src
LIB=build/_vendE/kimi_linear_chunk/kimi_linear_chunk/sm_90a
X=experiments/2026-12-01-prep2/same_bits.py
el "same bits (plain launches)"
timeout 100 python3 $X run build/_vendA/kimi_linear_chunk/kimi_linear_chunk/sm_90a $O/old.pt && timeout 100 python3 $X run $LIB $O/new.pt \
  && python3 $X cmp $O/old.pt $O/new.pt > $O/same_bits.log 2>&1
echo "same-bits rc $?"; grep -c identical $O/same_bits.log; rm -f $O/*.pt
el "overlap"
timeout 200 python3 experiments/2026-12-01-prep3/overlap.py $LIB $O/overlap.json > $O/overlap.log 2>&1
echo "overlap rc $?"; cat $O/overlap.log | grep -v Warning | tail -30
el done
tar czf $OUT/call3.tgz -C /tmp o
