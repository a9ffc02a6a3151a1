#!/usr/bin/env bash
# Device call 9 (H200): slot_lead.patch at SLOT_LEAD 1 (the slot one chunk past the one being copied: with two stages,
# chunk j + 2 while chunk j computes), routed Kimi chunk build build/_ab/cl1 against HEAD's (build/_ab/chead). Bits on
# five unsplit cases, then P1-P6 softplus and the K3 set, alternating, two rounds (no peers).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o; rm -rf $O; mkdir -p $O
X=experiments/2026-12-03-wgfold/split_bench.py
declare -A LIB=([chead]=build/_ab/chead/kimi_linear_chunk/sm_90a [cl1]=build/_ab/cl1/kimi_linear_chunk/sm_90a)
python3 $X bits ${LIB[chead]} $O/old.pt > $O/bits.log 2>&1 && python3 $X bits ${LIB[cl1]} $O/new.pt >> $O/bits.log 2>&1 \
  && python3 $X cmp $O/old.pt $O/new.pt >> $O/bits.log 2>&1; echo "bits rc $?"; rm -f $O/*.pt
for r in 1 2; do for L in chead cl1; do
  timeout 80 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes p --gates softplus --no-fla --no-cudnn \
    --out $O/p_${L}_$r > $O/p_${L}_$r.log 2>&1 || echo "p $L $r failed"
  timeout 60 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes k3 --no-fla --no-cudnn \
    --out $O/k3_${L}_$r > $O/k3_${L}_$r.log 2>&1 || echo "k3 $L $r failed"
done; done
python3 - "$O" <<'PY' | tee $O/table.md
import json, sys
O = sys.argv[1]
ms = lambda p: {r["id"]: r["kda2"]["ms_median"] for r in json.load(open(p + "/bench_chunk.json"))["rows"]}
for kind in ("p", "k3"):
    t = {L: [ms(f"{O}/{kind}_{L}_{r}") for r in (1, 2)] for L in ("chead", "cl1")}
    print(f"\n| {kind} | HEAD ms | SLOT_LEAD 1 ms |\n|---|---|---|")
    for s in t["chead"][0]:
        print(f"| {s} | " + " | ".join(" / ".join(f"{x[s]:.4f}" for x in t[L]) for L in ("chead", "cl1")) + " |")
PY
tar czf $OUT/call9.tgz -C /tmp o
