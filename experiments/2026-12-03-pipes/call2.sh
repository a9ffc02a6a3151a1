#!/usr/bin/env bash
# Device call (H200): the prep variants built by mkvariants.sh (build/_ab/v_*, vendored kimi_linear_chunk, sm_90a)
# against HEAD's build (v_base): unsplit outputs bit for bit (split_bench.py bits / cmp), then kda2 bench P1–P6
# (softplus) and the K3 set (lower_bound), no peers, every variant once per round, two rounds, the order rotated.
# CALL names the tarball (default call2; experiments/2026-12-03-prefetch runs this script for its calls 1, 3, 4).
set -u -o pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
O=/tmp/o; rm -rf $O; mkdir -p $O
X=experiments/2026-12-03-wgfold/split_bench.py
VARS="base $*"
lib() { echo build/_ab/v_$1/kimi_linear_chunk/sm_90a; }
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
el bits
python3 $X bits $(lib base) $O/base.pt > $O/bits.log 2>&1 || echo "bits base failed"
for v in $*; do
  python3 $X bits $(lib $v) $O/$v.pt >> $O/bits.log 2>&1 && python3 $X cmp $O/base.pt $O/$v.pt >> $O/bits.log 2>&1
  echo "bits $v vs base: rc $?"; rm -f $O/$v.pt
done
el bench
for r in 1 2; do
  for v in $VARS; do
    timeout 80 python3 -m kda2.bench chunk --library $(lib $v) --shapes p --gates softplus --no-fla --no-cudnn \
      --out $O/p_${v}_$r > $O/p_${v}_$r.log 2>&1 || echo "p $v $r failed"
    timeout 60 python3 -m kda2.bench chunk --library $(lib $v) --shapes k3 --no-fla --no-cudnn \
      --out $O/k3_${v}_$r > $O/k3_${v}_$r.log 2>&1 || echo "k3 $v $r failed"
  done
  VARS="$(echo $VARS | awk '{for(i=NF;i>0;i--) printf "%s ", $i}')"
done
el tables
python3 - "$O" base "$@" <<'PY'
import json, sys
O, names = sys.argv[1], sys.argv[2:]
def ms(path):
    d = json.load(open(path + "/bench_chunk.json"))
    return {r["id"]: r["kda2"]["ms_median"] for r in d["rows"]}
for kind in ("p", "k3"):
    tab = {n: [ms(f"{O}/{kind}_{n}_{r}") for r in (1, 2)] for n in names}
    shapes = list(tab[names[0]][0])
    print("| shape | " + " | ".join(names) + " |")
    for s in shapes:
        print(f"| {s} | " + " | ".join(" / ".join(f"{t[r][s]:.4f}" for r in (0, 1)) for n, t in tab.items()) + " |")
PY
rm -f $O/*.pt   # (call 2 ran without this: its tarball was over the size limit)
tar czf $OUT/${CALL:-call2}.tgz -C /tmp o
