"""One-off (issue 13, chunk family): chunk configs gained `dtypes` (one prep + state entry per input dtype), which
changes every chunk variant id. Rewrite the chunk tuning records' ids to the ids of the same kernels with the
spec's input dtypes, so the measured routes still apply: the bf16 state, fold and combine SASS is identical to
the tuned build's, the bf16 prep widens bf16 with Elem16 (shifts, not cvt: 3592 vs 3648 SASS instructions on
sm_90a, same registers, same values) — its timing is not re-measured; the fp16 entries are added beside them. Run from the repository root:
    PYTHONPATH=src python experiments/2026-12-01-issue13-chunk/translate_tuning.py
"""
import json
from pathlib import Path

from kda2.plan.planner import plan_spec
from kda2.plan.profile import load_profiles
from kda2.plan.variant import variant_id
from kda2.spec.model import load_spec

profiles = load_profiles()
for record in sorted(Path("tuning").glob("*.json")):
    spec_name, profile = record.name.split(".")[:2]
    spec_path = Path("kernel_specs") / f"{spec_name}.yaml"
    if record.name.endswith(".partial.json") or not spec_path.is_file():
        continue
    spec = load_spec(spec_path)
    if spec.family != "chunk":
        continue
    data = json.loads(record.read_text())
    plan = plan_spec(spec, data["arch"], [], profile=profiles[profile])
    by_id = {pv.id: pv for pv in plan.variants}
    for key, r in data["routes"].items():  # per route: the same kernel among that row's candidates
        layout, bucket = key.split(":")
        row = next(d for d in plan.dispatch if d["state_layout"] == layout and d["bucket"] == int(bucket))
        old_to_new = {variant_id({k: v for k, v in by_id[i].config.items() if k != "dtypes"}): i
                      for i in row["candidates"]}
        r["variant"] = old_to_new.get(r["variant"], r["variant"])
        r["candidates"] = {old_to_new.get(i, i): c for i, c in r.get("candidates", {}).items()}
        for c in r.get("classes", {}).values():  # each batch class's own winner (its rows share the candidates)
            c["variant"] = old_to_new.get(c["variant"], c["variant"])
        print(record.name, key, r["variant"])
    record.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
