#!/usr/bin/env bash
# Device call 3 (H200): the benchmarks' new command-line shapes on HEAD's routed libraries (recurrent N<n>T<t>[h],
# chunk B<b>T<t>H<h>, against a named shape in the same run), and the event-timing floor (launch_floor.py).
. experiments/2026-12-02-d2pre/dev.sh   # $O, el, summ, finish
tar xJf build/_ab/libs.tar.xz && tar xJf build/_ab/chunk.tar.xz -C /tmp || exit 3   # build/_ab/rec; /tmp/vchunk
el "recurrent: D2, M1 and custom sizes"
timeout 120 python3 -m kda2.bench recurrent --no-fla --library build/_ab/rec/kimi_linear_recurrent \
  --shapes D2,M1,N64T1,N64T4,N96T2,N256T1h --out $O/rec > $O/rec.log 2>&1; echo "rc $?"
summ $O/rec/bench_recurrent.json custom
el "recurrent: a bad shape"
timeout 60 python3 -m kda2.bench recurrent --no-fla --library build/_ab/rec/kimi_linear_recurrent --shapes D2,N64 \
  --out $O/bad > $O/bad.log 2>&1; echo "rc $? (2 expected)"; tail -2 $O/bad.log
el "chunk: P6 and custom sizes, no peers"
timeout 200 python3 -m kda2.bench chunk --no-fla --no-cudnn --library /tmp/vchunk/kimi_linear_chunk/sm_90a/manifest.json --iters 10 \
  --shapes P6,B2T2048H8,B1T4096H16,B3T1000H4 --out $O/chunk > $O/chunk.log 2>&1; echo "rc $?"; grep -E "^\| (P6|B)" $O/chunk/bench_chunk.md | head -12
el "launch floor"
timeout 60 python3 experiments/2026-12-04-evict/launch_floor.py $O/launch_floor.json > $O/launch_floor.log 2>&1; echo "rc $?"
cat $O/launch_floor.log | tail -12
finish call3
