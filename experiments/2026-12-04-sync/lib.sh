# Sourced by this folder's device calls (run from the repository root on the device; build/_ab carried).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
O=/tmp/o
# build/<spec>/sm_90a -> the working tree's vendored build in build/_ab/n_<spec> (what pipes/call3.sh tests as "new")
link_new() {
  for s in small_head_chunk kimi_linear_chunk large_head_chunk; do
    mkdir -p build/$s; rm -rf build/$s/sm_90a; ln -s "$PWD/build/_ab/n_$s/$s/sm_90a" build/$s/sm_90a
  done
}
# bits against HEAD's v_base / v_b64 / v_b256 and the chunk GPU tests with the overlap module at K = 64, 128, 256
tests_new() {
  GPU_TESTS="tests/gpu/test_chunk_gpu.py tests/gpu/test_chunk_split_gpu.py tests/gpu/test_chunk_overlap_gpu.py" \
    TESTS_ONLY=1 CALL=$1 bash experiments/2026-12-03-pipes/call3.sh 2>&1 | grep -v "^tail:"
}
# ab_bench ROUNDS LABEL=LIB ...: P1-P6 softplus and the K3 set per library, alternating, no peers
ab_bench() {
  local rounds=$1 L; shift
  for r in $(seq $rounds); do
    for pair in "$@"; do
      L=${pair%%=*}
      timeout 90 python3 -m kda2.bench chunk --library ${pair#*=} --shapes p --gates softplus --no-fla --no-cudnn \
        --out $O/p_${L}_$r > $O/p_${L}_$r.log 2>&1 || echo "p $L $r rc $?"
      timeout 60 python3 -m kda2.bench chunk --library ${pair#*=} --shapes k3 --no-fla --no-cudnn \
        --out $O/k3_${L}_$r > $O/k3_${L}_$r.log 2>&1 || echo "k3 $L $r rc $?"
    done
  done
}
# ab_table ROUNDS "LABEL:column title" ...: the ms table of ab_bench's runs (first label the baseline), into $O/table.md
ab_table() {
  python3 - "$O" "$@" <<'PY' | tee $O/table.md
import json, sys
O, R, cols = sys.argv[1], range(1, int(sys.argv[2]) + 1), [c.split(":", 1) for c in sys.argv[3:]]
ms = lambda p: {r["id"]: r["kda2"]["ms_median"] for r in json.load(open(p + "/bench_chunk.json"))["rows"]}
for kind in ("p", "k3"):
    t = {L: [ms(f"{O}/{kind}_{L}_{r}") for r in R] for L, _ in cols}
    print("| shape | " + " | ".join(title for _, title in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for s in t[cols[0][0]][0]:
        print(f"| {s} | " + " | ".join(" / ".join(f"{x[s]:.4f}" for x in t[L]) for L, _ in cols) + " |")
PY
}
