"""One-off (issue 13): recurrent configs gained `dtypes` and `intermediate`, which changes every variant id. Rewrite the
tune locks' ids to the ids of the same kernels with the spec's input dtypes, so the measured routes
still apply (the code for bf16 inputs is unchanged). Run from the repository root:
    PYTHONPATH=src python experiments/2026-11-30-issue13/translate_locks.py
"""
import json
from pathlib import Path

from kda2.plan.planner import plan_spec
from kda2.plan.variant import variant_id
from kda2.spec.model import load_spec

for lock in sorted(Path("kernel_specs").glob("*.lock.json")):
    spec = load_spec(lock.with_name(lock.name.replace(".lock.json", ".yaml")))
    if spec.family != "recurrent":
        continue
    data = json.loads(lock.read_text())
    for arch, entry in data["archs"].items():
        plan = plan_spec(spec, arch, [])
        by_id = {pv.id: pv for pv in plan.variants}
        for key, r in entry["routes"].items():  # per route: the same kernel among that row's candidates
            layout, bucket = key.split(":")
            row = next(d for d in plan.dispatch if d["state_layout"] == layout and d["bucket"] == int(bucket))
            old_to_new = {variant_id({k: v for k, v in by_id[i].config.items() if k not in ("dtypes", "intermediate", "state_dtypes")}): i
                          for i in row["candidates"]}
            r["variant"] = old_to_new.get(r["variant"], r["variant"])
            r["candidates"] = {old_to_new.get(i, i): c for i, c in r.get("candidates", {}).items()}
            print(lock.name, arch, key, r["variant"])
    lock.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
