#!/usr/bin/env bash
# Device call 2: (1) ncu: predicted vs measured shared-memory wavefronts of the TIR-chosen layouts; (2) the chunk
# GPU tests with those layouts (no FLA: the 5e-3 bar); (3) cuDNN-FE probe, then kda2 vs cuDNN-FE on P1-P6 and the
# k3 shapes (no FLA here: FLA's Triton warm-up goes with the full run).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/nvidia_cudnn*.whl || exit 3
export CUDNN_FRONTEND_CAKE_CACHE_DIR=/tmp/cake
D=experiments/2026-11-30-tir-layouts
LIB=build/kimi_linear_chunk
PYTHONPATH=$ROOT/src:/tmp/site python3 -m kda2.bench.cudnn_peer --warm > $OUT/cudnn_probe.log 2>&1 &
P=$!
# (1) ncu
CAND="l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum smsp__sass_inst_executed_op_shared_ld.sum smsp__sass_inst_executed_op_shared_st.sum smsp__sass_inst_executed_op_ldsm.sum l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
ncu --query-metrics --chip gh100 > /tmp/metrics.txt 2>&1
M=$(for m in $CAND; do grep -q "^${m%.sum} " /tmp/metrics.txt && echo -n "$m,"; done); M=${M%,}
echo "metrics: $M"
PYTHONPATH=$ROOT/src ncu --metrics "$M" --csv -k regex:kda2_chunk python3 $D/run_case.py $LIB > $OUT/ncu_metrics.csv 2> $OUT/ncu.err; echo "ncu rc $?"
PLAN=$(ls $LIB/sm_90a/*vf_c64bv64s2*.plan.json | head -1)
python3 $D/ncu_check.py $PLAN $OUT/ncu_metrics.csv $OUT/ncu_check.json || { head -40 $OUT/ncu_metrics.csv; tail -5 $OUT/ncu.err; }
# (2) tests
PYTHONPATH=$ROOT/src python3 -m pytest -m gpu tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py -q -rs -p no:cacheprovider \
  --chunk-library $LIB 2>&1 | tee $OUT/gpu_tests.log | tail -6
wait $P; echo "probe rc $?"; tail -8 $OUT/cudnn_probe.log
# (3) kda2 vs cuDNN-FE
export PYTHONPATH=$ROOT/src:/tmp/site
python3 -m kda2.bench chunk --no-fla --out /tmp/p --shapes p --gates softplus,lower_bound > $OUT/bench_p.log 2>&1; echo "bench p rc $?"
python3 -m kda2.bench chunk --no-fla --out /tmp/k3 --shapes k3 --gates lower_bound > $OUT/bench_k3.log 2>&1; echo "bench k3 rc $?"
cp /tmp/p/bench_chunk.json $OUT/bench_p.json; cp /tmp/k3/bench_chunk.json $OUT/bench_k3.json
cat /tmp/p/bench_chunk.md /tmp/k3/bench_chunk.md 2>/dev/null | head -60
