#!/usr/bin/env bash
# Device call 4, carry ["build/_ab/vall.tar.xz", "build/_ab/forms.tar.xz"]: the working tree's fused16 (form d) and
# three earlier forms side by side — a: the two-CTAs-an-SM form of 0558a01 (never run before), b: a + w's operand
# k 2^Γ made once in step 4 and step 5's warp-uniform paths; c: b + 16-byte rows of A / T̃ (e2e2f58); d: c + qg, kg and
# k 2^Γ emitted by step 2 from its products and per-channel factors (one ex2 and one reciprocal an element), step 4
# the substitution alone. The fp64 GPU tests on d (then c, b, a where one fails: the bisection), the four forms' time
# against the routed library (same process, alternating; the composed split where chains are few; cuDNN-FE where
# importable), ncu of one P3 call of the tree's form.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
F=/tmp/f4; rm -rf $F; mkdir -p $F
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
tar xJf build/_ab/vall.tar.xz -C /tmp || exit 3
tar xJf build/_ab/forms.tar.xz -C /tmp || exit 3
H=src/kda2/codegen/include/kda2/fused.cuh
for form in d c b a; do
  [ $form = d ] || cp /tmp/forms/$form/kda2/fused.cuh $H   # this machine's copy of the tree: thrown away after the call
  el "fused GPU tests, form $form"
  timeout 200 python3 -m pytest -m gpu tests/gpu/test_fused_gpu.py -q -s --require-gpu -p no:cacheprovider \
    --maxfail=4 > $F/test_fused_$form.log 2>&1; rc=$?; echo "form $form tests rc $rc"
  grep -E "^fused16" $F/test_fused_$form.log | sed 's/^fused16 //' | sort -t' ' -k5 -g | tail -3
  tail -2 $F/test_fused_$form.log; grep -E "^E  |Error" $F/test_fused_$form.log | head -8
  [ $rc = 0 ] && break
done
el "fused timing (forms a, b, c beside the tree's)"
FUSED_FORMS="a=/tmp/forms/a b=/tmp/forms/b c=/tmp/forms/c" timeout 260 python3 experiments/2026-12-05-fused/time_fused.py \
  /tmp/vall/kimi_linear_chunk/sm_90a $F/time_fused.json P3 P4 P6 P1 K10 K1 K5 K9 > $F/time_fused.log 2>&1
echo "timing rc $?"; tail -14 $F/time_fused.log
el "ncu"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 90 $NCU --kernel-name regex:fused16 --launch-skip 1 --launch-count 1 --set full --import-source yes \
  -o $F/p3 python3 experiments/2026-12-05-fused/one_call.py P3 softplus 2 > $F/p3.log 2>&1
echo "ncu rc $?"
$NCU -i $F/p3.ncu-rep --page details > $F/p3_details.txt 2>&1
$NCU -i $F/p3.ncu-rep --page source --csv --print-source cuda,sass > $F/p3_cudasass.csv 2>&1
grep -E "Duration|Registers Per|Achieved Occupancy|Eligible Warps|Issued Warp|Block Limit|Executed Ipc A" $F/p3_details.txt | head -12
gzip $F/*.csv; rm -f $F/p3.ncu-rep
cp -r $F $OUT/call4
el done
