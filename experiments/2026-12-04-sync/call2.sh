#!/usr/bin/env bash
# Device call 2 (H200): bar.patch alone (what lands): the working tree's three chunk specs vendored to
# build/_ab/n_<spec>; bits against HEAD's (v_base, v_b64, v_b256) and the chunk GPU tests with the overlap module at
# K = 64, 128, 256 (pipes/call3.sh, TESTS_ONLY); then HEAD, bar and noload (bar + noload.patch: no tile copies,
# timing only, outputs wrong: what the loads cost the item) alternating, two rounds. Carry build/_ab.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
for s in small_head_chunk kimi_linear_chunk large_head_chunk; do
  mkdir -p build/$s; rm -rf build/$s/sm_90a; ln -s "$PWD/build/_ab/n_$s/$s/sm_90a" build/$s/sm_90a
done
O=/tmp/o
GPU_TESTS="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py" \
  TESTS_ONLY=1 CALL=call2 bash experiments/2026-12-03-pipes/call3.sh 2>&1 | grep -v "^tail:"
declare -A LIB=([old]=build/_ab/v_base/kimi_linear_chunk/sm_90a [bar]=build/_ab/n_kimi_linear_chunk/kimi_linear_chunk/sm_90a
                [noload]=build/_ab/v_noload/kimi_linear_chunk/sm_90a)
for r in 1 2; do
  for L in old bar noload; do
    timeout 90 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes p --gates softplus --no-fla --no-cudnn \
      --out $O/p_${L}_$r > $O/p_${L}_$r.log 2>&1 || echo "p $L $r rc $?"
    timeout 60 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes k3 --no-fla --no-cudnn \
      --out $O/k3_${L}_$r > $O/k3_${L}_$r.log 2>&1 || echo "k3 $L $r rc $?"
  done
done
python3 - "$O" <<'PY' | tee $O/table.md
import json, sys
O, R, Ls = sys.argv[1], (1, 2), ("old", "bar", "noload")
ms = lambda p: {r["id"]: r["kda2"]["ms_median"] for r in json.load(open(p + "/bench_chunk.json"))["rows"]}
for kind in ("p", "k3"):
    t = {L: [ms(f"{O}/{kind}_{L}_{r}") for r in R] for L in Ls}
    print("| shape | HEAD ms | bar ms | noload ms (outputs wrong) |\n|---|---|---|---|")
    for s in t["old"][0]:
        print(f"| {s} | " + " | ".join(" / ".join(f"{x[s]:.4f}" for x in t[L]) for L in Ls) + " |")
PY
tar czf $OUT/call2.tgz -C /tmp o
