#!/usr/bin/env bash
# Device call 3 (H200): calibrate + tune both families (issue 11), the issue-13 GPU tests (recurrent matrix and
# cases with FLA on the Kimi form; chunk runtime cases), the layouts' ncu check. Everything lands in one tarball.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$ROOT/src:/tmp/site TRITON_CACHE_DIR=/tmp/triton CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
kda2() { python3 -m kda2.tools.cli "$@"; }
T0=$(date +%s)
echo "== calibrate"; timeout 120 kda2 calibrate --out $O/h200-measured.yaml > $O/calibrate.log 2>&1; echo "rc $?"; cat $O/h200-measured.yaml
echo "== tune"
TUN=$O/tuning; cp -r tuning $TUN
LIBS="build/kimi_linear_recurrent/sm_90a build/small_head_recurrent/sm_90a build/kimi_linear_chunk/sm_90a"
kda2 tune --dry-run $LIBS --tuning $TUN > $O/tune_dry_run.txt 2>&1; echo "dry rc $?"
for attempt in 1 2; do
  LEFT=$(( 260 - ($(date +%s) - T0) )); [ $LEFT -gt 30 ] || break
  timeout $((LEFT + 30)) python3 -m kda2.tools.cli tune $LIBS --tuning $TUN --quick --time-limit $LEFT >> $O/tune.log 2>&1
  rc=$?; echo "tune attempt $attempt rc $rc (elapsed $(( $(date +%s) - T0 )) s)"; [ $rc -eq 3 ] || break
done
tail -5 $O/tune.log
echo "== issue 13 GPU tests"
timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py -q \
  --require-gpu --results-dir $O --fla-recurrent=kimi -k "not compute_sanitizer" -rs -p no:cacheprovider > $O/gpu_recurrent.log 2>&1
echo "recurrent rc $?"; tail -4 $O/gpu_recurrent.log
timeout 90 python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q --fla-cases=none \
  -k "bad_inputs or graph or device_only or split" -rs -p no:cacheprovider > $O/gpu_chunk.log 2>&1
echo "chunk rc $?"; tail -3 $O/gpu_chunk.log
timeout 60 python3 -m pytest -q tests/test_dtypes_gva_decode.py tests/test_runtime_cpu.py -rs -p no:cacheprovider > $O/unit_torch.log 2>&1
echo "unit-torch rc $?"; tail -2 $O/unit_torch.log
echo "== ncu"
D=experiments/2026-11-30-tir-layouts
M=l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__sass_inst_executed_op_shared_ld.sum,smsp__sass_inst_executed_op_shared_st.sum,smsp__sass_inst_executed_op_ldsm.sum
timeout 60 ncu --metrics $M --csv -k regex:kda2_chunk python3 $D/run_case.py build/kimi_linear_chunk > $O/ncu_metrics.csv 2> $O/ncu.err
python3 $D/ncu_check.py $(ls build/kimi_linear_chunk/sm_90a/*vf_c64bv64s2*.plan.json | head -1) $O/ncu_metrics.csv $O/ncu_check.json
echo "elapsed $(( $(date +%s) - T0 )) s"
tar czf $OUT/call3.tgz -C /tmp o
cp $O/tune.log $O/gpu_recurrent.log $OUT/ 2>/dev/null; ls -la $OUT
