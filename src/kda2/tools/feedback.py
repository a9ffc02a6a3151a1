"""The feedback layer: failure records -> rules (`kda2 rules propose`), rule lint (`kda2 rules check`) and
what a rule would change (`kda2 rules impact`).

Failure records are JSON lines in `tuning/failures/<spec>.<profile>.jsonl`, written by `kda2 tune` (wrong
result, launch error, spill, slower than the row's incumbent by a margin), each with an `id`, the GPU, the
command, the numbers and the candidate's knobs. A proposed rule forbids the failing candidate's knobs (or
adds flags), scoped to the arch for code-level failures (the same code fails on every GPU of the arch) and
to the profile for speed (slower on one GPU model says nothing of another), with the failure as evidence.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from kda2.artifact.manifest import DEFAULT_BUILD_DIRS
from kda2.spec.rules import FILE_PATTERN, RuleError, check_lock, load_rule, load_rules, write_lock

#: Failure kinds and what they say about a candidate (the rule's reason starts with it).
KINDS = {
    "wrong_result": "its result differs from the float64 reference beyond the accuracy bar",
    "launch_error": "its launch fails",
    "spill": "ptxas spills its registers to local memory",
    "register_budget": "ptxas needs more registers per thread than the spec's budget.max_registers",
    "compile_error": "it does not compile",
    "slower_than_incumbent": "it is slower than the dispatch row's incumbent by more than the margin",
}
#: Code-level failures hold on every GPU of an arch; speed is one GPU model's.
_PROFILE_SCOPED = ("slower_than_incumbent",)
#: Failures of one spec's own budget: a rule matches every spec of the arch, so it would forbid the config where
#: other budgets allow it; the spec's budget is what changes.
SPEC_SCOPED = ("register_budget",)


def budget_advice(rec: dict[str, Any]) -> str:
    """What to do about a failure of the spec's own budget (no rule: see SPEC_SCOPED)."""
    need = re.search(r"needs (\d+) registers", rec.get("detail", ""))
    return (f"failure {rec['id']} is spec {rec['spec']}'s register budget ({rec.get('detail', '')[:160]}): raise "
            f"budget.max_registers in its spec to at least {need[1] if need else 'what ptxas reports'}, or narrow "
            f"its agents' knobs; no rule (a rule would forbid this config for every spec on {rec['arch']})")


def read_failures(path: str | os.PathLike) -> list[dict[str, Any]]:
    p = Path(path)
    out = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise RuleError(f"{p}:{n}: not a JSON line ({e})") from None
        if not isinstance(rec, dict) or "id" not in rec or rec.get("kind") not in KINDS:
            raise RuleError(f"{p}:{n}: not a failure record (needs id and kind; allowed kinds: {', '.join(KINDS)})")
        out.append(rec)
    return out


def find_failure(ref: str, tuning_dir: str | os.PathLike = "tuning") -> dict[str, Any]:
    """A failure by `FILE`, `FILE:ID` or `ID` (searched in tuning/failures/*.jsonl)."""
    path, _, rid = ref.partition(":") if ":" in ref and not Path(ref).exists() else (ref, "", "")
    if Path(path).is_file():
        recs = read_failures(path)
        if rid:
            hit = [r for r in recs if r["id"] == rid]
            if not hit:
                ids = ", ".join(r["id"] for r in recs[-12:])  # the newest: a long record holds hundreds
                raise RuleError(f"{path}: no failure {rid}; it holds {len(recs)}"
                                + (f" (the last {min(12, len(recs))}: {ids})" if recs else ""))
            return hit[0]
        if len(recs) != 1:
            raise RuleError(f"{path}: holds {len(recs)} failures; name one as {path}:ID "
                            f"(ids: {', '.join(r['id'] for r in recs[:12])}{' ...' if len(recs) > 12 else ''})")
        return recs[0]
    root = Path(tuning_dir) / "failures"
    hits = [r for f in sorted(root.glob("*.jsonl")) for r in read_failures(f) if r["id"] == ref]
    if not hits:
        raise RuleError(f"{ref}: neither a failure file nor a failure id in {root}/*.jsonl")
    return hits[0]


def _next_id(rules_dir: Path) -> int:
    ids = [int(p.name[:4]) for p in rules_dir.glob("*.yaml") if re.match(FILE_PATTERN, p.name)]
    return max(ids, default=0) + 1


def _slug(rec: dict[str, Any]) -> str:
    kn = rec.get("knobs", {})
    bits = [rec["kind"].replace("_", "-"), rec["family"], rec.get("profile") if rec["kind"] in _PROFILE_SCOPED
            else rec["arch"]]
    bits += [f"{k.replace('_', '')}{v}" for k, v in kn.items() if k in ("block_v", "stages", "v_per_warp", "warps")]
    return re.sub(r"[^a-z0-9-]+", "-", "-".join(str(b) for b in bits if b).lower()).strip("-")[:60]


def propose(ref: str, *, rules_dir: str = "rules", tuning_dir: str = "tuning", action: str = "forbid",
            flags: list[str] | None = None, scope: str | None = None, profiles_dir: str | None = None) -> Path:
    """Write rules/NNNN-<slug>.yaml from a failure record and re-lock; returns its path. `profiles_dir`: where
    the rule's match.profile is checked (kda2.spec.rules.load_rule)."""
    rec = find_failure(ref, tuning_dir)
    if rec["kind"] in SPEC_SCOPED:
        raise RuleError(budget_advice(rec))
    root = Path(rules_dir)
    if not root.is_dir():
        raise RuleError(f"{root}: no such rules directory")
    if action not in ("forbid", "flags"):
        raise RuleError(f"--action {action}: allowed: forbid, flags")
    if action == "flags" and not flags:
        raise RuleError("--action flags needs --flag (one nvcc option each, e.g. -Xptxas=-O3)")
    scope = scope or ("profile" if rec["kind"] in _PROFILE_SCOPED else "arch")
    if scope not in ("arch", "profile"):
        raise RuleError(f"--scope {scope}: allowed: arch, profile")
    match: dict[str, Any] = {"family": rec["family"], scope: rec[scope]}
    if rec["kind"] in _PROFILE_SCOPED:
        match["bucket"] = rec["bucket"]  # slower for this row's lengths; another bucket may still want it
    match["config"] = dict(rec["knobs"])
    rid = _next_id(root)
    numbers = json.dumps(rec.get("numbers", {}), sort_keys=True)
    origin = " ".join(str(rec.get("command", "kda2 tune")).split()[:2])  # kda2 tune or kda2 build
    where = f"row {rec['route']}" if rec.get("route") else "at build"
    evidence = (f"{origin} failure {rec['id']} ({rec['kind']}), {rec.get('date', '?')}, GPU {rec.get('gpu', '?')} "
                f"(profile {rec.get('profile')}, {rec['arch']}), spec {rec['spec']} {where}, variant "
                f"{rec['variant']}: {rec.get('detail', '')}; numbers {numbers}; command: {rec.get('command', '?')}; "
                f"record tuning/failures/{rec['spec']}.{rec.get('profile')}.jsonl")
    body: dict[str, Any] = {"id": rid, "version": 1, "match": match, "action": action}
    if action == "flags":
        body["flags"] = list(flags or [])
    body["reason"] = (f"{rec['family']} candidates with these knobs on {rec[scope]}: {KINDS[rec['kind']]} "
                      f"({rec.get('detail', '')}).")
    body["evidence"] = evidence
    path = root / f"{rid:04d}-{_slug(rec)}.yaml"
    header = (f"# Proposed by `kda2 rules propose {ref}` from a {rec['kind']} failure. Review the match (it is the\n"
              f"# failing candidate's knobs; widen or narrow it), then `kda2 rules check`.\n")
    path.write_text(header + yaml.safe_dump(body, sort_keys=False, width=110, allow_unicode=True))
    try:
        load_rule(path, profiles_dir)
        write_lock(root)
    except RuleError:
        path.unlink(missing_ok=True)
        raise
    return path


# ---- check and impact --------------------------------------------------------------------------

def _plans(specs_dir: str, rules: list, profiles_dir: str | None):
    from kda2.plan.planner import plan_all
    from kda2.plan.profile import load_profiles
    from kda2.spec.model import load_specs

    return plan_all(load_specs(specs_dir), rules, None, load_profiles(profiles_dir))


def check(rules_dir: str = "rules", specs_dir: str = "kernel_specs", profiles_dir: str | None = None) -> list[str]:
    """Every problem with the rules: schema (load), lock digests and versions, rules matching no variant of
    any spec, and rules that leave a dispatch row with no variant."""
    from kda2.plan.planner import PlanError

    rules = load_rules(rules_dir, profiles_dir)  # raises RuleError on a schema problem
    problems = list(check_lock(rules_dir))
    try:
        _, warnings = _plans(specs_dir, rules, profiles_dir)
    except PlanError as e:
        return problems + [str(e)]
    problems += [w for w in warnings if "matches no current variant" in w]
    return problems


def impact(rule_path: str, *, rules_dir: str = "rules", specs_dir: str = "kernel_specs",
           profiles_dir: str | None = None, build_dir: str | Sequence[str] | None = None,
           log: Callable[[str], None] = print) -> dict[str, dict[str, int]]:
    """Per (spec, arch): candidates the rule matches, kernels it removes / adds / re-flags, dispatch rows it
    re-routes, and built kernels (<tree>/<spec>/<arch>/manifest.json) it invalidates, in `build_dir` (one tree or
    several; default: the routed and the every-candidate tree, artifact/manifest.py DEFAULT_BUILD_DIRS). Each spec is planned on its
    own, so a spec the rule leaves without a variant for some row is reported as that (under "plan_fails", its
    error), not as every kernel removed; the others get their figures."""
    from kda2.plan.planner import PlanError, plan_all
    from kda2.plan.profile import load_profiles
    from kda2.spec.model import load_specs
    from kda2.spec.rules import apply_rules

    trees = ([build_dir] if isinstance(build_dir, (str, os.PathLike)) else
             list(build_dir) if build_dir is not None else list(DEFAULT_BUILD_DIRS.values()))
    rule = load_rule(rule_path, profiles_dir)
    others = [r for r in load_rules(rules_dir, profiles_dir) if r.id != rule.id]
    withs = sorted(others + [rule], key=lambda r: r.id)
    profiles = load_profiles(profiles_dir)
    out: dict[str, dict[str, Any]] = {}
    for spec in load_specs(specs_dir):
        base, _ = plan_all([spec], others, None, profiles)
        try:
            withr, err = plan_all([spec], withs, None, profiles)[0], None
        except PlanError as e:
            withr, err = None, str(e)
        for i, p in enumerate(base):
            key = f"{p.spec.name}/{p.arch}"
            prof = p.profile.name
            matched = sum(1 for c in p.considered if rule.matches(c) or rule in apply_rules(withs, c).matched)
            if withr is None:
                out[key] = {"candidates_matched": matched, "plan_fails": err}
                log(f"{key} ({prof}): candidates matched {matched}; with this rule its plan fails: {err}")
                continue
            q = withr[i]
            before, after = {v.id: v for v in p.variants}, {v.id: v for v in q.variants}
            rerouted = sum(1 for a, b in zip(p.dispatch, q.dispatch) if a["variant"] != b["variant"])
            reflagged = sum(1 for vid in before.keys() & after.keys() if before[vid].flags != after[vid].flags)
            per_tree = {}
            for tree in trees:
                man = Path(tree) / p.spec.name / p.arch / "manifest.json"
                if man.is_file():
                    m = json.loads(man.read_text())
                    rows_of = {v["id"]: [d["bucket"] for d in m.get("dispatch", [])
                                         if v["id"] in d.get("candidates", [])] for v in m.get("variants", [])}
                    per_tree[tree] = sum(1 for v in m.get("variants", []) if any(
                        rule.matches({**v["config"], "bucket": b, "profile": prof}) for b in rows_of[v["id"]] or [0]))
            built = sum(per_tree.values())
            row = {"candidates_matched": matched, "kernels_removed": len(before.keys() - after.keys()),
                   "kernels_added": len(after.keys() - before.keys()), "kernels_reflagged": reflagged,
                   "rows_rerouted": rerouted, "built_kernels_invalidated": built}
            out[key] = row
            log(f"{key} ({prof}): " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in row.items())
                + (f" ({', '.join(f'{t}: {n}' for t, n in per_tree.items() if n)})" if built else ""))
    return out


# ---- build failures ----------------------------------------------------------------------------

_FAILED_TARGET = re.compile(r"scons: \*\*\* \[(?P<path>[^\]]+)\] (?P<why>.*)")
_KERNEL_ID = re.compile(r"_(?P<id>[0-9a-f]{12})\.(?P<ext>o|cubin|ptxas\.log|resources\.json)$")
#: Names a build gives its temporaries, which differ on every run: `<name>.<pid>.<thread id>` (nvcc.py's keep
#: dirs, `-o` outputs and `.tmp` files) and nvcc's `tmpxft_<pid>_<n>` files. In a record's detail they would make
#: the same failure a new id (and a new record) on every rerun, so they are replaced by fixed text.
_TEMP_NAMES = ((re.compile(r"(?<=\w)\.\d+\.\d{5,}\b"), ".PID.TID"),
               (re.compile(r"tmpxft_[0-9a-f]+_[0-9a-f]+"), "tmpxft_*"))
#: A kernel's failure that is not its code's (a tool killed by a signal): no record, since a rule against the
#: config would not help. (An OSError that escapes an action is not `Error N`: below.)
_NOT_THE_KERNEL = re.compile(r"exited -\d+\b")


def _error_blocks(lines: list[str]) -> list[tuple[int, list[str]]]:
    """(index, lines) of each `kda2: error:` message with the tool output under it, up to the next kda2 or scons
    line. Parallel jobs (-j) print a kernel's error before or after other kernels' and `scons: ***` lines in any
    order, so a failed target's message is found by its name, not by where it is."""
    out: list[tuple[int, list[str]]] = []
    cur: list[str] | None = None
    for i, ln in enumerate(lines):
        if ln.startswith("kda2: error:"):
            cur = [ln]
            out.append((i, cur))
        elif ln.startswith(("kda2:", "kda2 ", "scons: ", "Retrieved")):
            cur = None
        elif cur is not None:
            cur.append(ln)
    return out


def record_build_failures(lines: list[str], *, top: str | os.PathLike = ".", build_dir: str = "build",
                          tuning_dir: str = "tuning", command: str = "kda2 build") -> list[dict[str, Any]]:
    """Failure records for the kernels a failed build names (`scons: *** [<kernel target>] ...`): nvcc or
    nvlink errors are `compile_error`, the resource check's refusal `spill` (spills or a register overrun); none for
    a failure of the environment (an OSError, a tool killed by a signal), which no rule would fix. A record's detail
    is its kernel's own messages, without the names of the build's temporaries, so a rerun's failure has the same
    id and is not recorded again.
    Their knobs come from the plan cache (build/.kda2/plan-cache.json); appended to
    tuning/failures/<spec>.<profile>.jsonl like kda2 tune's, so `kda2 rules propose` reads both."""
    import hashlib

    from kda2.artifact.atomic import write_text

    root = Path(top)
    try:
        cache = json.loads((root / build_dir / ".kda2" / "plan-cache.json").read_text())
    except (OSError, ValueError):
        return []
    by_id = {}
    for p in cache.get("plans", []):
        for v in p["variants"]:
            by_id[(p["spec"]["name"], p["arch"], v["id"])] = (p, v)
    out: list[dict[str, Any]] = []
    blocks = _error_blocks(lines)
    for i, line in enumerate(lines):
        m = _FAILED_TARGET.search(line)
        k = _KERNEL_ID.search(m["path"]) if m else None
        # SCons says `Error N` when an action returned N after saying why; anything else is an exception that
        # escaped the action (an OSError, a kda2 bug), which says nothing about the kernel's config
        if not k or not re.fullmatch(r"Error -?\d+", m["why"].strip()):
            continue
        parts = Path(m["path"]).parts
        spec, arch = (parts[-3], parts[-2]) if len(parts) >= 3 else ("?", "?")
        hit = by_id.get((spec, arch, k["id"]))
        if hit is None:
            continue
        plan, v = hit
        # this kernel's own messages (their first line names its target or kernel, both end in its id), not the
        # other kernels' that -k or -j print around it
        own = [b for j, b in blocks if j < i and re.search(rf"_{k['id']}\b", b[0])]
        if any(_NOT_THE_KERNEL.search(b[0]) for b in own):
            continue
        text = [ln.strip() for b in own for ln in b if ln.strip() and "error" in ln.lower()]
        for pat, repl in _TEMP_NAMES:
            text = [pat.sub(repl, ln) for ln in text]
        detail = " | ".join(text) or m["why"]
        # the resource check's message says which (compile/ptxas.py check): over the register budget, or spills
        kind = ("compile_error" if k["ext"] != "resources.json" else
                "register_budget" if "more than budget.max_registers" in detail and " spills " not in detail
                else "spill")
        # its start names the kernel and the first error (nvcc's root cause); a long one loses its end
        detail = detail if len(detail) <= 600 else detail[:597] + "..."
        from kda2.spec.knobs import agent_knobs

        cfg = v["config"]
        body = {"kind": kind, "spec": spec, "profile": plan.get("profile", {}).get("name"), "arch": arch,
                "family": cfg["family"], "gpu": "none (build)", "route": None, "bucket": None,
                "variant": v["id"], "knobs": agent_knobs(cfg),
                "config": cfg, "numbers": {}, "detail": detail, "command": command, "library_sha256": None}
        body["id"] = hashlib.sha256(json.dumps({x: y for x, y in body.items() if x != "command"}, sort_keys=True,
                                               default=str).encode()).hexdigest()[:12]
        import datetime as _dt

        body["date"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        out.append(body)
        path = root / tuning_dir / "failures" / f"{spec}.{body['profile']}.jsonl"
        have = path.read_text() if path.is_file() else ""
        if f'"id": "{body["id"]}"' not in have:
            write_text(path, have + json.dumps(body, sort_keys=True) + "\n")
    return out
