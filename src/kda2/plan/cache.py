"""The planner's output for a build, cached by the digest of everything it reads.

Planning needs pydantic (specs, rules), which is a third of a no-op `scons -q`. The plan is a pure
function of the spec files, the rule files, the hardware profiles, the tuning records and the package's
code, so it is
stored as JSON under build/ keyed by the sha256 of exactly those bytes; a hit rebuilds the same plan
without importing pydantic. Any edit to one of them is a miss and plans afresh (and reports spec or
rule errors as usual).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kda2
from kda2.artifact.atomic import write_text
from kda2.plan.profile_view import ProfileView

CACHE_SCHEMA = 2


def _inputs_digest(specs_dir: str, rules_dir: str, only: list[str] | None, profiles_dir: str,
                   tuning_dir: str) -> str:
    h = hashlib.sha256(f"schema {CACHE_SCHEMA} kda2 {kda2.__version__} only {sorted(only or [])}\0".encode())
    # All of the package's Python, not a hand-kept list of planning modules: a list goes stale when
    # planning starts to use another module, and re-planning after an unrelated edit costs ~0.5 s once.
    files = sorted(Path(kda2.__file__).parent.rglob("*.py"))
    # tuning records route the dispatch rows; a partial record (an interrupted tune) routes nothing
    for d in (Path(specs_dir), Path(rules_dir), Path(profiles_dir), Path(tuning_dir)):
        files += sorted(p for p in d.iterdir() if p.is_file() and not p.name.endswith(".partial.json")) \
            if d.is_dir() else []
    for p in files:
        h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _ns(d: Any) -> Any:
    if isinstance(d, dict):
        return SimpleNamespace(**{k: _ns(v) for k, v in d.items()})
    return d


def _to_json(plans, warnings) -> dict:
    out = []
    for p in plans:
        s = p.spec
        out.append({"spec": {"name": s.name, "family": s.family, "source": str(s.source),
                             "budget": s.budget.model_dump(), "head_dims": s.head_dims.model_dump(),
                             "features": s.canonical()["features"], "seq_len_buckets": list(s.seq_len_buckets),
                             "digest": s.digest()},
                    "arch": p.arch, "dispatch": [dict(d) for d in p.dispatch],
                    # the whole profile: kda2 tune reads it from here where pydantic is not installed
                    "profile": {**p.profile.model_dump(mode="json"), "digest": p.profile.digest()},
                    "variants": [{"id": v.id, "name": v.name, "config": v.config, "reasons": v.reasons,
                                  "flags": v.flags, "rules_digest": v.rules_digest, "rules": v.rules}
                                 for v in p.variants]})
    return {"plans": out, "warnings": list(warnings)}


def _from_json(data: dict) -> tuple[list[SimpleNamespace], list[str]]:
    plans = []
    for p in data["plans"]:
        spec = p["spec"]
        variants = [SimpleNamespace(id=v["id"], name=v["name"], config=v["config"],
                                    reasons=tuple(tuple(r) for r in v["reasons"]), flags=tuple(v["flags"]),
                                    rules_digest=v["rules_digest"], rules=tuple(v["rules"])) for v in p["variants"]]
        plans.append(SimpleNamespace(
            spec=SimpleNamespace(name=spec["name"], family=spec["family"], source=spec["source"],
                                 budget=_ns(spec["budget"]), head_dims=_ns(spec["head_dims"]),
                                 features=spec["features"], seq_len_buckets=spec["seq_len_buckets"],
                                 digest=spec["digest"]),
            arch=p["arch"], dispatch=tuple(p["dispatch"]), variants=tuple(variants),
            profile=ProfileView(p["profile"]),
            # what kda2 tune needs of the plan (profile and budget), into the library's manifest: a build tree
            # copied to a GPU host without kda2[build] or this cache still tunes
            planned={"profile": p["profile"], "budget": spec["budget"]}))
    return plans, data["warnings"]


def load_plans(specs_dir: str, rules_dir: str, build_dir: str, only: list[str] | None = None,
               profiles_dir: str | None = None, tuning_dir: str = "tuning"):
    """(plans, warnings) for the build; plans expose .spec/.arch/.variants/.dispatch/.profile as plain data."""
    from kda2.plan.profile import default_profiles_dir

    profiles_dir = str(profiles_dir or default_profiles_dir())
    key = _inputs_digest(specs_dir, rules_dir, only, profiles_dir, tuning_dir)
    cache = Path(build_dir) / ".kda2" / "plan-cache.json"
    old: dict = {}
    try:
        old = json.loads(cache.read_text())
        if old.get("key") == key:
            return _from_json(old)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        old = {}  # no cache or an unreadable one: plan afresh and rewrite it
    from kda2.plan.planner import plan_all
    from kda2.spec.rules import load_rules
    from kda2.spec.model import load_specs
    from kda2.plan.lock import class_times, read_spec_baselines, routes, tuned_splits
    from kda2.plan.profile import load_profiles, resolve_targets

    specs = load_specs(specs_dir)
    if only:
        unknown = sorted(set(only) - {s.name for s in specs})
        if unknown:
            raise ValueError(f"SPECS names unknown spec(s) {', '.join(unknown)}; "
                             f"known: {', '.join(s.name for s in specs)}")
        specs = [s for s in specs if s.name in only]
    rules = load_rules(rules_dir, profiles_dir)
    profiles = load_profiles(profiles_dir)
    baselines = {s.name: read_spec_baselines(s.name, resolve_targets(s, profiles), tuning_dir) for s in specs}
    plans, warnings = plan_all(specs, rules, {name: routes(b) for name, b in baselines.items()}, profiles,
                               every_spec=not only, splits={name: tuned_splits(b) for name, b in baselines.items()},
                               times={name: class_times(b) for name, b in baselines.items()})
    # the tuned latency of each route the lock decided: the manifest carries it for the runtime monitor
    for p in plans:
        base = baselines[p.spec.name].get(p.arch, {})
        for d in p.dispatch:
            key = f"{d['state_layout']}:{d['bucket']}"
            b = base.get(f"{key}:{d['class']}", base.get(key))
            if d["routed_by"] == "tune" and b and b["variant"] == d["variant"]:
                d["tuned"] = {k: b[k] for k in ("us", "gpu", "date", "shape")}
    data = dict(_to_json(plans, warnings), key=key)
    # every profile, validated: `kda2 tune --profile NAME` reads the one it names here where pydantic is not installed
    data["profiles"] = {name: {**prof.model_dump(mode="json"), "digest": prof.digest()}
                        for name, prof in profiles.items()}
    # A build of some specs (SPECS=...) keeps the other specs' last plans beside its own, unplanned: their
    # libraries under build/ were built from them, and kda2 tune reads a library's profile and budget here.
    names = {p["spec"]["name"] for p in data["plans"]}
    data["other_plans"] = [p for p in old.get("plans", []) + old.get("other_plans", [])
                           if isinstance(p, dict) and p.get("spec", {}).get("name") not in names]
    write_text(cache, json.dumps(data, sort_keys=True))
    return _from_json(data)
