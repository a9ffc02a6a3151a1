#!/usr/bin/env bash
# Device call 3 (H200): what call 2 could not run (its warm-up script was read from stdin, which spawned workers cannot
# re-import): P1-P6 softplus with FLA 0.6.0 and cuDNN-FE 1.32 in the same process, then the five new chunk accuracy
# cases at K = 128 and 256 with FLA. $O is packed into $OUT after every step (the call may end at the session's
# device budget; the device returns at most eight files).
. experiments/2026-12-03-peers/dev.sh
snap() { rm -f $O/*/*.png; tar czf $OUT/call3.tgz -C /tmp o; }
LIB=$V/kimi_linear_chunk
NEW=T300-softplus-gva4-pbf16-vf,varlen-15-100-300-softplus-gva8-H1-kf,T300-lowerbound-gva8-pbf16-H1-kf
NEW=$NEW,fp16-T300-softplus-gva8-pbf16-H1-vf,fp16-varlen-15-100-300-softplus-gva4-pbf16-kf
el "FLA warm-up (16 option sets) and cuDNN compile"
( timeout 250 python3 experiments/2026-12-03-peers/warm_p_new.py $NEW > $O/fla_warm.log 2>&1; echo "warm rc $?" >> $O/rcs.txt ) &
( timeout 200 python3 -m kda2.bench.cudnn_peer --warm > $O/cudnn_probe.log 2>&1; echo "cudnn probe rc $?" >> $O/rcs.txt ) &
wait; cat $O/rcs.txt; grep -c " ok" $O/fla_warm.log; grep -i fail $O/fla_warm.log | head -3; snap
psp_bench; snap
el "chunk accuracy, new cases, K = 128 and 256 with FLA"
for K in 128 256; do new_cases $K; snap; done
python3 -m kda2.bench.report --roofline $O/psp/bench_chunk.json $O/roofline_p.png > $O/roofline_p.txt 2>&1
el done; snap
