#!/usr/bin/env bash
# Device call 11 (H200): HEAD's six default specs (vendored sm_90a, build/_ab/libs.tar.xz) against the peers in the
# same process: P1-P6 softplus with FLA 0.6.0 and cuDNN-FE 1.32 (cuDNN given the gate precomputed in fp32), the
# roofline chart, then cuDNN's ten Kimi-K3 shapes and P1-P6 with the bounded gate against cuDNN. FLA warmed first
# (parallel processes, P1-P6 softplus only) while cuDNN's kernel compiles. $O packed after every step. Carry build/_ab
# (libs.tar.xz, whl/).
. experiments/2026-12-03-peers/dev.sh
snap() { rm -f $O/*/*.png; tar czf $OUT/call11.tgz -C /tmp o; }
LIB=$V/kimi_linear_chunk
el "FLA warm-up (P1-P6 softplus) and cuDNN compile"
( timeout 240 python3 experiments/2026-12-03-peers/warm_p_new.py "" > $O/fla_warm.log 2>&1; echo "warm rc $?" >> $O/rcs.txt ) &
( timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "cudnn probe rc $?" >> $O/rcs.txt ) &
wait; cat $O/rcs.txt; grep -c " ok" $O/fla_warm.log; grep -i fail $O/fla_warm.log | head -3; snap
psp_bench
python3 -m kda2.bench.report --roofline $O/psp/bench_chunk.json $O/roofline_p.png > $O/roofline_p.txt 2>&1
cp $O/roofline_p.png $OUT/ 2>/dev/null; snap
el "bench K3 (cuDNN, bounded gate)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes k3 --gates lower_bound --out $O/k3 > $O/bench_k3.log 2>&1
echo "k3 rc $?"; grep -E "^\| K" $O/k3/bench_chunk.md | tail -10; snap
el "bench P1-P6 bounded gate (cuDNN)"
timeout 80 python3 -m kda2.bench chunk --no-fla --library $LIB --shapes p --gates lower_bound --out $O/plb > $O/bench_plb.log 2>&1
echo "p lb rc $?"; grep -E "^\| P" $O/plb/bench_chunk.md
el done; snap
