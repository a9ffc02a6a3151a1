#!/usr/bin/env bash
# Device call 2 (H200), HEAD's tuned Kimi chunk build against the peers in the same process: P1-P6 softplus with FLA
# 0.6.0 and cuDNN-FE 1.32 (cuDNN given the gate precomputed in fp32), P1-P6 and cuDNN's ten Kimi-K3 shapes with the
# bounded gate against cuDNN (FLA not timed on the bounded gate: its Triton warm-up would not fit the call), the
# roofline chart of the softplus run; then the chunk accuracy cases new this session (GVA 4 / 8, bf16 A_log /
# dt_bias) at K = 128 and 256 with FLA, which call 1's warm-up did not reach. FLA warmed first (parallel processes)
# while cuDNN's NVRTC kernel compiles.
. experiments/2026-12-03-peers/dev.sh
LIB=$V/kimi_linear_chunk
NEW=T300-softplus-gva4-pbf16-vf,varlen-15-100-300-softplus-gva8-H1-kf,T300-lowerbound-gva8-pbf16-H1-kf
NEW=$NEW,fp16-T300-softplus-gva8-pbf16-H1-vf,fp16-varlen-15-100-300-softplus-gva4-pbf16-kf
el "FLA warm-up (P1-P6 softplus; 5 new cases at K = 128, 256) and cuDNN compile"
( timeout 300 python3 - > $O/fla_warm.log 2>&1 <<PY
import concurrent.futures as cf, multiprocessing as mp
from kda2.bench import fla_warm
todo = [t for t in fla_warm.tasks("bench") if t[2] == "softplus"]
todo += [("case", c, k) for k in (128, 256) for c in "$NEW".split(",")]
with cf.ProcessPoolExecutor(max_workers=16, mp_context=mp.get_context("spawn")) as pool:
    for f in cf.as_completed([pool.submit(fla_warm.run_task, t) for t in todo]):
        print(*f.result(), flush=True)
PY
  echo "warm rc $?" >> $O/rcs.txt ) &
( timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "cudnn probe rc $?" >> $O/rcs.txt ) &
wait; cat $O/rcs.txt; grep -c " ok" $O/fla_warm.log; grep -i fail $O/fla_warm.log | head -3; tail -2 $O/cudnn_probe.log
el "bench K3 (cuDNN, bounded gate)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes k3 --gates lower_bound --out $O/k3 > $O/bench_k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10
el "bench P1-P6 bounded gate (cuDNN)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes p --gates lower_bound --out $O/plb > $O/bench_plb.log 2>&1
echo "p lb rc $?"; grep -E "^\| P" $O/plb/bench_chunk.md
psp_bench
python3 -m kda2.bench.report --roofline $O/psp/bench_chunk.json $O/roofline_p.png > $O/roofline_p.txt 2>&1
el "chunk accuracy, new cases, K = 128 and 256 with FLA"
for K in 128 256; do new_cases $K; done
finish call2
