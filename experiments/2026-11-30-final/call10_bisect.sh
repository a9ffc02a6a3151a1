#!/usr/bin/env bash
# Device call 10 (H200): where did decode slow down? D2/D3 of the recurrent library of five trees, same run, two
# rounds: .baseline (4ed4737, before the session), .bisect/<commit> (a6a0947: main before the issue-13 merge;
# cf561f7: issue 13's templated kernels; 5b5163e: + bf16-state entries), and this tree. Each tree runs its own
# runtime and bench on its own build; the routed variant of each row is printed beside its time.
set -u -o pipefail
ROOT=$PWD
run() {  # label src build
  PYTHONPATH=$2 python3 -m kda2.bench recurrent --no-fla --library $3/kimi_linear_recurrent --shapes D2,D3 \
    --out /tmp/o/$1_$r > /tmp/o/$1_$r.log 2>&1 || { echo "$1 failed"; tail -3 /tmp/o/$1_$r.log; return; }
  PYTHONPATH=$2 python3 - "$1" "$3" <<'PY'
import json, sys
lab, b = sys.argv[1], sys.argv[2]
d = json.load(open(f"/tmp/o/{lab}_{__import__('os').environ['r']}/bench_recurrent.json"))
m = json.load(open(f"{b}/kimi_linear_recurrent/sm_90a/manifest.json"))
route = {f"{x['state_layout'][0]}{x['bucket']}": x["variant"] for x in m["dispatch"]}
print(f"{lab:<8}", " ".join(f"{x['id']}/{x['layout'][0]} {x['graph_us']:.1f}us" for x in d["rows"]),
      "| k1", route.get("k1"), "v1", route.get("v1"))
PY
}
mkdir -p /tmp/o
for r in 1 2; do
  export r
  run base $ROOT/.baseline/src .baseline/build
  for c in a6a0947 cf561f7 5b5163e; do run $c $ROOT/.bisect/$c/src .bisect/$c/build; done
  run head $ROOT/src build
done
