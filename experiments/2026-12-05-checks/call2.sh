#!/usr/bin/env bash
# Device call 2 (H200), carry ["build/_ab", ".whl"]: what call 1 (call.sh, 2026-12-05 02:20 UTC) left — the FLA backend
# tests (call 1 carried fla-core only: no fla.layers), the two tests whose expectations changed (fp16 A_log is taken
# now; a kernel serving two batch classes has two monitor routes), and the chunk tests of the fp16-parameter cases
# alone (call 1's whole chunk file ran past its 450 s). Four groups at once, saved every 30 s.
TGZ=checks2.tgz; . experiments/2026-12-05-checks/setup.sh
el "four groups at once"
run fla_backend 480 tests/gpu/test_fla_backend_gpu.py -s -k "not prefill_time" &
run changed 300 tests/gpu/test_recurrent_matrix_gpu.py tests/gpu/test_monitor_gpu.py -k "raise_before_launch or monitor" &
run chunk16 480 tests/gpu/test_chunk_gpu.py -k "pfp16 or pbf16" \
  --fla-cases fp16-T300-softplus-gva2-pfp16-kf,T300-lowerbound-pfp16-vf &
for i in $(seq 1 16); do sleep 30; save; done &
wait %1 %2 %3
cat $O/rc.txt; for n in fla_backend changed chunk16; do
  echo "== $n: $(tail -1 $O/$n.log)"; grep -E "^FAILED|^ERROR" $O/$n.log | head -10; done
grep -E "rel L2|generation" $O/fla_backend.log | head -8
el done
kill %4 2>/dev/null; save
