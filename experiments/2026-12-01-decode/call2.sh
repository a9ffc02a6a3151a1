#!/usr/bin/env bash
# Device call 2 (H200): bulk-staged decode kernels (staging: bulk). The forced-variant GPU tests (fp64 reference)
# on every bulk / persistent variant and every multi-token candidate; the decode shapes on the library as routed
# before this session's tune (the same kernels the old routes name); the copy ceiling again; then kda2 tune (every
# candidate, bulk ones among them, timed at each batch class in one run).
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
NEW=build/_vendR/kimi_linear_recurrent/kimi_linear_recurrent/sm_90a
el "GPU tests: forced decode variants, every multi-token candidate"
KDA2_LIBRARY=$NEW timeout 200 python3 -m pytest -m gpu tests/gpu/test_recurrent_matrix_gpu.py -q --require-gpu \
  --fla-recurrent=none -k "forced or every_multi_token" -rs -p no:cacheprovider > $O/gpu_forced.log 2>&1
echo "tests rc $?"; tail -1 $O/gpu_forced.log; grep -E "^FAILED|^ERROR|Error" $O/gpu_forced.log | head -10
el "copy ceiling"; ./build/_exp/copy_ceiling > $O/copy_ceiling.txt 2>&1; grep -E "1 GiB|bulk 16 KB  |reg 128t x 8 f4 \(16 KB\)  " $O/copy_ceiling.txt
el "bench decode, routes as before the tune"
timeout 100 python3 -m kda2.bench recurrent --no-fla --library $NEW --shapes D1,D2,D3,M1 --out $O/dec_old \
  > $O/dec_old.log 2>&1; echo "bench rc $?"
python3 - $O/dec_old/bench_recurrent.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["rows"]:
    print(f"{x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.1f}, "
          f"{x.get('pct_copy', 0):.1f} % of copy, {x.get('pct_copy_same') or 0:.1f} % of equal-size")
PY
el tune; TUN=$O/tuning; cp -r tuning $TUN
timeout 330 python3 -m kda2.tools.cli tune $NEW --tuning $TUN --margin 0.2 --time-limit 300 --force > $O/tune.log 2>&1
echo "tune rc $?"; grep -E "^  [kv]_first:[18] |wrote|candidates, |rror" $O/tune.log | head -40
el done
tar czf $OUT/call2.tgz -C /tmp o
