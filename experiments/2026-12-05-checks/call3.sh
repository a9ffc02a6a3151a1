#!/usr/bin/env bash
# Device call 3 (H200), carry ["build/_ab", ".whl"]: the chunk GPU tests whole (calls 1 and 2 ran out of time on them
# with FLA's JIT), one process per chunk spec, FLA compared on no case (the kernels are byte-identical to those FLA
# was last compared with; the two new fp16-parameter cases were compared in call 2); and the recurrent, C++ example
# and monitor files once more after call 1's two test fixes. All against fp64; five groups at once, saved every 30 s.
TGZ=checks3.tgz; . experiments/2026-12-05-checks/setup.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $O/gpu.txt
el "five groups at once"
for s in kimi_linear_chunk small_head_chunk large_head_chunk; do
  run chunk_$s 500 tests/gpu/test_chunk_gpu.py --chunk-library build/$s --fla-cases none &
done
run recurrent 450 tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py --fla-recurrent=none &
run cpp_monitor 300 tests/gpu/test_cpp_example_gpu.py tests/gpu/test_monitor_gpu.py &
for i in $(seq 1 17); do sleep 30; save; done &
wait %1 %2 %3 %4 %5
cat $O/rc.txt; for n in chunk_kimi_linear_chunk chunk_small_head_chunk chunk_large_head_chunk recurrent cpp_monitor; do
  echo "== $n: $(tail -1 $O/$n.log)"; grep -E "^FAILED|^ERROR" $O/$n.log | head -10; done
el done
kill %6 2>/dev/null; save
