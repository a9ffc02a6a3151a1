#!/usr/bin/env bash
# Device call 7 (H200): overlap asked for on every call (--overlap on), HEAD's routed Kimi chunk library (old) against
# the early flag read (new, chunk.cuh peek_ready): does the overlap pay on the short shapes once the chain no longer
# acquires each flag behind a barrier? P1-P6 softplus and the K3 set, alternating, two rounds; auto for reference.
OLD_TAR=chunk_head.tar.xz NEW_TAR=chunk_peek.tar.xz
. experiments/2026-12-02-trail/ab_env.sh
for r in 1 2; do for lib in old new; do for ov in on auto; do
  L=/tmp/$lib/build/kimi_linear_chunk/sm_90a
  timeout 45 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes P1,P3,P4,P6 --gates softplus \
    --overlap $ov --out $O/p_${lib}_${ov}_$r > $O/p_${lib}_${ov}_$r.log 2>&1 || echo "rc $?"
  echo "P $r $lib $ov: $(row $O/p_${lib}_${ov}_$r.log)"
  timeout 45 python3 -m kda2.bench chunk --no-fla --no-cudnn --library $L --shapes k3 --overlap $ov \
    --out $O/k_${lib}_${ov}_$r > $O/k_${lib}_${ov}_$r.log 2>&1 || echo "rc $?"
  echo "K $r $lib $ov: $(row $O/k_${lib}_${ov}_$r.log)"
done; done; done
rm -f $O/*/*.png; cp -r $O $OUT/
