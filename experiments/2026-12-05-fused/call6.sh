#!/usr/bin/env bash
# Device call 6, carry ["build/_ab/vall.tar.xz", "build/_ab/forms.tar.xz"]. Call 5 found forms e / f (bulk copies and
# the decay stored in the consumer's order) 25 % slower than e1, and its ncu 1,024 shared wavefronts a step on the
# decay loads (the four quad lanes' 16-byte loads 128 bytes apart: one bank). Here: form i (the tree's: f with the
# decay stored so that one j2's loads are 64 consecutive bytes) and form g (e1, cp.async copies, + that decay order +
# step 5 on every warp) beside e1: the fp64 GPU tests on i (then g, e1), the three forms' time against the routed
# library (and cuDNN-FE where importable), ncu of one P3 call of the tree's form.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
F=/tmp/f6; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp || exit 3
tar xJf build/_ab/forms.tar.xz -C /tmp || exit 3
H=src/kda2/codegen/include/kda2/fused.cuh
for form in i g e1; do
  [ $form = i ] || cp /tmp/forms/$form/kda2/fused.cuh $H   # this machine's copy of the tree: thrown away after the call
  el "fused GPU tests, form $form"
  timeout 150 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider \
    --maxfail=4 > $F/test_fused_$form.log 2>&1; rc=$?; echo "form $form tests rc $rc"
  grep -E "^fused16" $F/test_fused_$form.log | sed 's/^fused16 //' | sort -t' ' -k5 -g | tail -2
  tail -1 $F/test_fused_$form.log; grep -E "^E  |Error" $F/test_fused_$form.log | head -8
  [ $rc = 0 ] && break
done
el "fused timing (forms e1, g beside the tree's)"
FUSED_SPLIT=0 FUSED_FORMS="e1=/tmp/forms/e1 g=/tmp/forms/g" timeout 200 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 P4 K10 K5 > $F/time_fused.log 2>&1
echo "timing rc $?"; cat $F/time_fused.log
el "ncu"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 90 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $F/p3 python3 experiments/2026-12-05-fused/one_call.py P3 softplus 2 > $F/p3.log 2>&1
echo "ncu rc $?"
$NCU -i $F/p3.ncu-rep --page details > $F/p3_details.txt 2>&1
$NCU -i $F/p3.ncu-rep --page source --csv --print-source cuda,sass > $F/p3_cudasass.csv 2>&1
grep -E "Duration|Issued Warp|Eligible Warps|Mem Busy" $F/p3_details.txt | head -6
gzip $F/*.csv; rm -f $F/p3.ncu-rep
cp -r $F $OUT/call6
el done
