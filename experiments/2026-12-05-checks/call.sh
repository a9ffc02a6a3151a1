#!/usr/bin/env bash
# Device call (H200), carry ["build/_ab", ".whl"], after pack.sh: the GPU checks of what 2026-12-04/05 changed on a
# CPU only. 1) the FLA backend on FLA's own layer and model, bf16 and (new) an fp16 layer whose A_log / dt_bias are
# fp16; 2) the recurrent matrix (input dtype x gate-parameter dtype, now fp32 / bf16 / fp16, x GVA x layout) and the
# recurrent tests; 3) the chunk tests, FLA run on the two fp16-parameter cases only (each new FLA option set costs
# ~100 s of Triton JIT); 4) the C++ example and the monitor. Every test against fp64 (and FLA where it runs).
TGZ=checks.tgz; . experiments/2026-12-05-checks/setup.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $O/gpu.txt
# The four groups run at once (correctness only: FLA's Triton JIT, ~100 s per new option set, is CPU work and the
# device has 16 cores); the FLA backend's timing test is left out, since it would time a shared GPU.
el "four groups at once"
run fla_backend 450 tests/gpu/test_fla_backend_gpu.py -s -k "not prefill_time" &
run recurrent 450 tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_recurrent_gpu.py &
run chunk 450 tests/gpu/test_chunk_gpu.py --fla-cases fp16-T300-softplus-gva2-pfp16-kf,T300-lowerbound-pfp16-vf &
run cpp_monitor 300 tests/gpu/test_cpp_example_gpu.py tests/gpu/test_monitor_gpu.py &
for i in $(seq 1 15); do sleep 30; save; done &   # what has come so far survives a kill at the call's limit
wait %1 %2 %3 %4
cat $O/rc.txt; for n in fla_backend recurrent chunk cpp_monitor; do
  echo "== $n: $(tail -1 $O/$n.log)"; grep -E "^FAILED|^ERROR" $O/$n.log | head -10; done
el done
kill %5 2>/dev/null; save
