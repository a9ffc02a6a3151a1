#!/usr/bin/env bash
# Device call 5 (H200), nothing else on the GPU (call 4's tuned-vs-untuned and decode timings overlapped FLA's
# warm-up processes and are void): calibrate; tune with the committed records as incumbents, --margin 0.2 (the
# failures are the rules' evidence); tuned vs untuned, alternating, two rounds; the decode benchmark.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
el calibrate; timeout 120 python3 -m kda2.tools.cli calibrate --out $O/h200-measured.yaml > $O/calibrate.log 2>&1; echo "rc $?"
cat $O/h200-measured.yaml; tail -3 $O/calibrate.log
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 200 python3 -m kda2.tools.cli tune build/kimi_linear_recurrent/sm_90a build/small_head_recurrent/sm_90a \
  build/kimi_linear_chunk/sm_90a --tuning $TUN --margin 0.2 --time-limit 170 > $O/tune.log 2>&1; echo "rc $?"
grep -c slower_than_incumbent $TUN/failures/*.jsonl
for r in 1 2; do
  for lib in untuned tuned; do
    d=build; [ $lib = untuned ] && d=build_untuned
    el "round $r $lib"
    python3 -m kda2.bench chunk --no-fla --no-cudnn --library $d/kimi_linear_chunk --shapes p --gates softplus \
      --out $O/chunk_${lib}_$r > $O/chunk_${lib}_$r.log 2>&1; echo "chunk rc $?"
    python3 -m kda2.bench recurrent --no-fla --library $d/kimi_linear_recurrent --shapes D2 --out $O/dec_${lib}_$r \
      > $O/dec_${lib}_$r.log 2>&1; echo "decode rc $?"
  done
done
el "decode benchmark"
python3 -m kda2.bench recurrent --no-fla --library build/kimi_linear_recurrent --shapes D1,D2,D3,M1,D2h,D3h \
  --out $O/decode > $O/decode.log 2>&1; echo "rc $?"
el done
tar czf $OUT/call5.tgz -C /tmp o; ls -la $OUT
