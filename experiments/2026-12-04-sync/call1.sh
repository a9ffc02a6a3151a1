#!/usr/bin/env bash
# Device call 1 (H200): the prep with fewer CTA barriers (bar.patch: no barrier after a tensor-copied gate's wait, the
# l2norm straight after q / k's wait writing the zeros of rows past the sequence, the scan's hand-over by bar.arrive /
# bar.sync) and a warp-local copy-out of step 6 (s6local.patch, on bar). The working tree's three chunk specs
# (bar + s6local) vendored to build/_ab/n_<spec>, bar alone at K = 128 to build/_ab/v_bar, HEAD's to v_base / v_b64 /
# v_b256, HEAD's recurrent library to v_rec. Bits against HEAD and the chunk GPU tests (with the overlap module) at
# K = 64, 128, 256 (pipes/call3.sh, TESTS_ONLY), beside them the recurrent GPU tests on HEAD's library (its host
# tensor-map encoder was refactored in 7c744b3 and not yet run); then HEAD, bar and bar + s6local alternating, two
# rounds. Carry build/_ab.
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
for s in small_head_chunk kimi_linear_chunk large_head_chunk; do
  mkdir -p build/$s; rm -rf build/$s/sm_90a; ln -s "$PWD/build/_ab/n_$s/$s/sm_90a" build/$s/sm_90a
done
O=/tmp/o
( sleep 20; KDA2_LIBRARY=$PWD/build/_ab/v_rec/kimi_linear_recurrent/sm_90a timeout 400 python3 -m pytest -m gpu \
    tests/gpu/test_recurrent_gpu.py tests/gpu/test_recurrent_matrix_gpu.py -q --fla-recurrent none -rs \
    -p no:cacheprovider > /tmp/rec_gpu.log 2>&1; echo "recurrent rc $? $(tail -1 /tmp/rec_gpu.log)" > /tmp/rec_rc.txt ) &
GPU_TESTS="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py" \
  TESTS_ONLY=1 CALL=call1 bash experiments/2026-12-03-pipes/call3.sh
wait; cp /tmp/rec_gpu.log /tmp/rec_rc.txt $O/; cat $O/rec_rc.txt
declare -A LIB=([old]=build/_ab/v_base/kimi_linear_chunk/sm_90a [bar]=build/_ab/v_bar/kimi_linear_chunk/sm_90a
                [new]=build/_ab/n_kimi_linear_chunk/kimi_linear_chunk/sm_90a)
for r in 1 2; do
  for L in old bar new; do
    timeout 80 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes p --gates softplus --no-fla --no-cudnn \
      --out $O/p_${L}_$r > $O/p_${L}_$r.log 2>&1 || echo "p $L $r failed"
    timeout 60 python3 -m kda2.bench chunk --library ${LIB[$L]} --shapes k3 --no-fla --no-cudnn \
      --out $O/k3_${L}_$r > $O/k3_${L}_$r.log 2>&1 || echo "k3 $L $r failed"
  done
done
python3 - "$O" <<'PY' | tee $O/table.md
import json, sys
O, R, Ls = sys.argv[1], (1, 2), ("old", "bar", "new")
ms = lambda p: {r["id"]: r["kda2"]["ms_median"] for r in json.load(open(p + "/bench_chunk.json"))["rows"]}
for kind in ("p", "k3"):
    t = {L: [ms(f"{O}/{kind}_{L}_{r}") for r in R] for L in Ls}
    print("| shape | HEAD ms | bar ms | bar + s6local ms |\n|---|---|---|---|")
    for s in t["old"][0]:
        print(f"| {s} | " + " | ".join(" / ".join(f"{x[s]:.4f}" for x in t[L]) for L in Ls) + " |")
PY
tar czf $OUT/call1.tgz -C /tmp o
