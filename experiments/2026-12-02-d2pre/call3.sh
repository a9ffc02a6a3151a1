#!/usr/bin/env bash
# Device call 3 (H200): the routed Kimi recurrent build with call 2's tune (new.tar.xz: D2 / D3 k_first on T = 1
# preload kernels) against the session's starting build (old.tar.xz): recurrent GPU tests on the new one, then D1, D2,
# D3, M1 (both layouts), alternating, two rounds. Then M1 with the routes forced against their twins built without
# per-token states (noit.tar.xz: the multi-token agent's intermediate off in a scratch tree, m1_noit.yaml), two rounds.
. experiments/2026-12-02-d2pre/dev.sh
mkdir -p /tmp/old /tmp/new
tar xJf build/_ab/old.tar.xz -C /tmp/old && tar xJf build/_ab/new.tar.xz -C /tmp/new || exit 3
rec_tests /tmp/new/kimi_linear_recurrent
for r in 1 2; do for lib in old new; do
  el "bench round $r $lib"
  timeout 90 python3 -m kda2.bench recurrent --no-fla --library /tmp/$lib/kimi_linear_recurrent --shapes D1,D2,D3,M1 \
    --out $O/dec_${lib}_$r > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
done; done
unpack noit
NOIT=/tmp/ab/build/_noit/m1_noit
for r in 1 2; do for key in k_first:76ee8257a276:b57a54d35917 v_first:d5e2e307b97b:959f8bd70376; do
  IFS=: read l v w <<< "$key"
  for lv in new:$v noit:$w; do
    lib=/tmp/new/kimi_linear_recurrent; [ ${lv%%:*} = noit ] && lib=$NOIT
    timeout 60 python3 -m kda2.bench recurrent --no-fla --library $lib --shapes M1 --layouts $l --variant ${lv##*:} \
      --out $O/m_${l}_${lv##*:}_$r > $O/m_${l}_${lv##*:}_$r.log 2>&1 && summ $O/m_${l}_${lv##*:}_$r/bench_recurrent.json "r$r ${lv}" \
      || { echo "bench M1 $l ${lv} failed"; tail -3 $O/m_${l}_${lv##*:}_$r.log; }
  done
done; done
finish call3
