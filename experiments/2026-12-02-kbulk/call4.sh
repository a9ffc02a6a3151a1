#!/usr/bin/env bash
# Device call 4 (H200): the k_first tensor maps with L2 promotion of 256 B (build/_ab/vP.tar.xz, library only: the same
# cubins) against none (vR2, this session's routed build): D2, D3, M1, alternating, three rounds.
set -u -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; O=/tmp/o; rm -rf $O; mkdir -p $O /tmp/ab
export PYTHONPATH=$ROOT/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
for t in vR2 vP; do tar xJf build/_ab/$t.tar.xz -C /tmp/ab || exit 3; done
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], f"copy {d['copy']['TBps']:.3f} TB/s")
for x in d["rows"]:
    if x["layout"] == "k_first":
        print(f"  {x['id']}/{x['layout']}: {x['ms_median'] * 1e3:.1f} us, graph {x['graph_us']:.2f}, "
              f"{x.get('pct_copy', 0):.1f} % of copy")
PY
}
for r in 1 2 3; do for lib in vR2 vP; do
  el "bench round $r $lib"
  timeout 80 python3 -m kda2.bench recurrent --no-fla --library /tmp/ab/_$lib/kimi_linear_recurrent --shapes D2,D3,M1 \
    --out $O/dec_${lib}_$r > $O/dec_${lib}_$r.log 2>&1 && summ $O/dec_${lib}_$r/bench_recurrent.json "$lib $r" \
    || { echo "bench $lib failed"; tail -3 $O/dec_${lib}_$r.log; }
done; done
el done
rm -f $O/dec_*/*.png
tar czf $OUT/call4.tgz -C /tmp o
