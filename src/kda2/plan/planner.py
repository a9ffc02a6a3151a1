"""Plan stage: Spec x arch -> the variants to build and the dispatch table that routes to them.

Agents propose and prune candidates per (state layout, seq_len bucket); rules then forbid, set or add
flags; the dispatch table has one row per batch class of each (layout, bucket) (kda2.plan.model.class_rows:
calls are told apart by their number of state chains, N·HV). A row calls the tuned winner of its class, else
the first surviving candidate; the others are built too, as tuning candidates reachable by index.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from kda2.artifact.manifest import check_candidates
from kda2.plan.agents import FAMILY_AGENTS, Candidate
from kda2.plan.agents.chunk import row_split
from kda2.plan.hardware import STATIC_SMEM_PER_BLOCK
from kda2.plan.model import class_rows
from kda2.plan.profile import Profile, load_profiles, resolve_targets
from kda2.spec.rules import Rule, apply_rules, unmatched
from kda2.spec.model import Budget, Spec
from kda2.plan.variant import splits, variant_id, variant_name
from kda2.spec.knobs import FAMILY_FIELDS, INPUT_DTYPES, MATCH_ONLY_FIELDS, knob


class PlanError(ValueError):
    """The spec and rules leave some (layout, bucket) without any variant."""


@dataclass(frozen=True)
class PlannedVariant:
    config: dict[str, Any]
    reasons: tuple[tuple[str, str], ...]
    flags: tuple[str, ...]        # extra nvcc flags from rules (signed by the compile nodes only)
    rules_digest: str             # digest of exactly the rules that matched (provenance, not a build input)
    rules: tuple[str, ...]        # "NNNN@vV" of those rules, for people

    @property
    def id(self) -> str:
        return variant_id(self.config)

    @property
    def name(self) -> str:
        return variant_name(self.config)


@dataclass(frozen=True)
class SpecPlan:
    spec: Spec
    arch: str
    variants: tuple[PlannedVariant, ...]     # library index order
    dispatch: tuple[dict[str, Any], ...]     # {"state_layout", "bucket", "class", "min_chains", "index", "variant",
                                             #  "routed_by", "candidates", "split", "split_by", "split_why"}: one
                                             #  row per batch class of a bucket
    considered: tuple[dict[str, Any], ...]   # every config the agents proposed (for rule warnings)
    warnings: tuple[str, ...] = ()
    profile: Profile | None = None           # the hardware the agents designed for


def _base_config(spec: Spec, arch: str) -> dict[str, Any]:
    """What every kernel of the spec compiles in; the agents add their knobs. No bucket (see variant.py)."""
    f = spec.features
    base = {"family": spec.family, "arch": arch, "k": spec.head_dims.k, "v": spec.head_dims.v,
            "gate_modes": sorted(f.gate_modes), "qk_l2norm": f.qk_l2norm,
            "dtypes": [d for d in INPUT_DTYPES if d in f.input_dtypes],
            "beta_sigmoid": f.beta_sigmoid, "varlen": f.varlen}
    return {k: v for k, v in base.items() if k in FAMILY_FIELDS[spec.family]}  # only what the family compiles in


def plan_spec(spec: Spec, arch: str, rules: Sequence[Rule], tuned: Mapping[str, str] | None = None,
              profile: Profile | None = None, tuned_splits: Mapping[str, int] | None = None,
              tuned_times: Mapping[str, Mapping[str, float]] | None = None) -> SpecPlan:
    """`tuned`: {"<layout>:<bucket>:<class>": variant id} from the spec's tuning record for this arch, if any (a
    "<layout>:<bucket>" key, from a record of one class per bucket, routes every class of the bucket).
    `tuned_splits`: {"<layout>:<bucket>:<class>": segments} the record confirmed for that class's winner (chunk; a row
    routed elsewhere keeps the agents' split). `tuned_times`: {"<layout>:<bucket>:<class>": {variant id: us}}, every
    candidate the record timed at the class: a row routed to a fused twin falls back to the fastest of them that is
    not one, for the calls its fused kernel does not take (docs/DESIGN.md §1). `profile`: the hardware the agents
    design for (default: the spec's target for `arch`, from profiles/)."""
    if profile is None:
        profile = resolve_targets(spec, load_profiles())[arch]
    if profile.arch != arch:
        raise PlanError(f"{spec.source}: profile {profile.name} is {profile.arch}, not {arch}")
    agents = FAMILY_AGENTS[spec.family]
    picked: list[tuple[str, int, PlannedVariant]] = []
    considered: list[dict[str, Any]] = []
    for bucket in spec.seq_len_buckets:
        cands = [Candidate(_base_config(spec, arch))]
        for agent in agents:
            cands = agent(spec, profile, bucket, cands)
        # rules see the bucket (they may scope by it); the kernel's config never holds it
        considered.extend({**c.config, "bucket": bucket, "profile": profile.name} for c in cands)
        for c in cands:
            applied = apply_rules(rules, {**c.config, "bucket": bucket, "profile": profile.name})
            if applied.config is None:
                continue
            why = tuple((f"rule {r.id:04d} v{r.version}", f"{r.action}: {' '.join(r.reason.split())}")
                        for r in applied.matched)
            config = {k: v for k, v in applied.config.items() if k not in MATCH_ONLY_FIELDS}
            pv = PlannedVariant(config=config, reasons=c.reasons + why, flags=applied.flags, rules_digest=applied.digest,
                                rules=tuple(f"{r.id:04d}@v{r.version}" for r in applied.matched))
            picked.append((pv.config["state_layout"], bucket, pv))

    variants: list[PlannedVariant] = []
    warnings: list[str] = []
    stale: list[str] = []   # rows whose tuned winner is no longer a candidate
    unmeasured: list[str] = []   # batch classes a record measured other classes of its row but not (newer classes)
    seen: set[str] = set()
    dispatch: list[dict[str, Any]] = []
    for layout in ("k_first", "v_first"):
        if layout not in spec.features.state_layouts:
            continue
        for bucket in spec.seq_len_buckets:
            group = [pv for lay, b, pv in picked if lay == layout and b == bucket]
            if not group:
                why = _why_none_survive(spec, arch, profile, rules, agents, layout, bucket, considered)
                raise PlanError(f"{spec.source}: no variant survives for state_layout={layout}, bucket {bucket} "
                                f"on {arch}: {why}")
            for pv in group:
                if pv.id not in seen:
                    seen.add(pv.id)
                    variants.append(pv)
            # one row per batch class (kda2.plan.model.class_rows); untuned, every class takes the agents' first
            key = f"{layout}:{bucket}"
            for w, min_chains in class_rows(spec.family, bucket):
                first, routed_by = group[0], "rank"
                winner = (tuned or {}).get(f"{key}:{w.name}", (tuned or {}).get(key))
                if (tuned and f"{key}:{w.name}" not in tuned and key in tuned
                        and any(k.startswith(f"{key}:") for k in tuned)):
                    unmeasured.append(f"{key} ({w.name})")
                if winner is not None:
                    match = [pv for pv in group if pv.id == winner]
                    if match:
                        first, routed_by = match[0], "tune"
                    else:
                        stale.append(f"{key} ({w.name}): {winner}")
                split, split_by, split_why = 1, "family", "recurrent kernels take no split"
                if spec.family == "chunk":
                    split, split_why = row_split(first.config, profile, bucket, min_chains)
                    split_by = "agents"
                    confirmed = (tuned_splits or {}).get(f"{key}:{w.name}")
                    if confirmed is not None and routed_by == "tune":
                        split, split_by = confirmed, "tune"
                        split_why = (f"tune: {confirmed} segment(s) timed fastest for {first.id} at this row's fewest "
                                     f"chains (tuning/{spec.name}.{profile.name}.json); the agents': {split_why}")
                fallback = None
                if spec.family == "chunk" and knob(first.config, "fused"):   # the calls its fused kernel does
                    timed = (tuned_times or {}).get(f"{key}:{w.name}", {})       # not take: the fastest non-twin
                    plain = [pv for pv in group if not knob(pv.config, "fused") and pv.id in timed]
                    fallback = min(plain, key=lambda pv: timed[pv.id]).id if plain else None
                dispatch.append({"state_layout": layout, "bucket": bucket, "class": w.name, "min_chains": min_chains,
                                 "variant": first.id, "routed_by": routed_by,
                                 "index": next(i for i, v in enumerate(variants) if v.id == first.id),
                                 "fallback": fallback,
                                 "fallback_index": next((i for i, v in enumerate(variants) if v.id == fallback), -1),
                                 "candidates": [pv.id for pv in group],
                                 "split": split, "split_by": split_by, "split_why": split_why})
    if stale:  # one line per record: a spec edit (head dims, knobs) can leave every row's winner behind
        warnings.append(f"tuning record tuning/{spec.name}.{profile.name}.json ({arch}): the tuned variant of "
                        f"{len(stale)} dispatch row(s) is no longer a candidate ({'; '.join(stale)}); they route to "
                        f"the agents' first choice (re-run `kda2 tune`)")
    if unmeasured:   # a class added after the record (model.workloads): routed by its row's first-class winner
        warnings.append(f"tuning record tuning/{spec.name}.{profile.name}.json ({arch}) did not time "
                        f"{len(unmeasured)} batch class(es) ({'; '.join(unmeasured)}); they route to their row's "
                        f"winner (re-run `kda2 tune`)")
    return SpecPlan(spec=spec, arch=arch, variants=tuple(variants), dispatch=tuple(dispatch),
                    considered=tuple(considered), warnings=tuple(warnings), profile=profile)


def _why_none_survive(spec: Spec, arch: str, profile: Profile, rules: Sequence[Rule], agents: Sequence[Any],
                      layout: str, bucket: int, considered: Sequence[dict[str, Any]]) -> str:
    """What left (layout, bucket) without a variant, for PlanError: the rules that forbade what the agents' budget
    kept, or the budget limit(s) that dropped every candidate, with the least value that keeps one. Those values are
    the budget agent's own verdicts, asked again with that budget field raised (no second model of its estimates)."""
    kept = [c for c in considered if c["state_layout"] == layout and c["bucket"] == bucket]
    if kept:  # the budget kept some: rules forbade every one (forbid stops, so it is the last rule matched)
        by_rule: dict[str, int] = {}
        for c in kept:
            r = apply_rules(rules, c).matched[-1]
            name = f"rule {r.id:04d} v{r.version}" + (f" ({r.path})" if r.path else "")
            by_rule[name] = by_rule.get(name, 0) + 1
        return (f"rules forbid all {len(kept)} candidate(s) the agents' budget kept: "
                + ", ".join(f"{name} forbids {n}" for name, n in by_rule.items())
                + "; relax or narrow the forbidding rule, or widen agents/budget in the spec")
    at = next((i for i, a in enumerate(agents) if getattr(a, "name", None) == "budget"), None)
    if at is None:
        return "the agents proposed no candidate for it; widen agents in the spec"
    cands = [Candidate(_base_config(spec, arch))]
    for agent in agents[:at]:
        cands = agent(spec, profile, bucket, cands)
    cands = [c for c in cands if c.config["state_layout"] == layout]
    if not cands:
        return "the agents proposed no candidate for it (before the budget); widen agents in the spec"
    b = spec.budget
    reg_top, smem_top = (next(m.le for m in Budget.model_fields[f].metadata if getattr(m, "le", None) is not None)
                         for f in ("max_registers", "max_smem_bytes"))  # the most a spec may ask for

    def keeps(regs: int, smem: int) -> bool:
        s = spec.model_copy(update={"budget": b.model_copy(update={"max_registers": regs, "max_smem_bytes": smem})})
        out = cands
        for agent in agents[at:]:
            out = agent(s, profile, bucket, out)
        return any(c.config["state_layout"] == layout for c in out)

    def least(lo: int, hi: int, ok: Any) -> int | None:
        """The least value in [lo, hi] for which ok holds (it holds for every larger one), or None."""
        if not ok(hi):
            return None
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
        return lo

    head = f"the agents' budget dropped all {len(cands)} candidate(s) the agents proposed"
    regs = least(b.max_registers, reg_top, lambda r: keeps(r, b.max_smem_bytes))
    smem = least(b.max_smem_bytes, smem_top, lambda m: keeps(b.max_registers, m))
    fixes = []
    if regs is not None:
        fixes.append(f"budget.max_registers {b.max_registers} binds: the leanest candidate within the rest of the "
                     f"budget is estimated at {regs} registers (budget.max_registers {regs} keeps one)")
    if smem is not None:
        fixes.append(f"budget.max_smem_bytes {b.max_smem_bytes} binds: the leanest candidate within the rest of the "
                     f"budget is estimated at {smem} B of shared memory (budget.max_smem_bytes {smem} keeps one)")
    if fixes:
        return f"{head}; " + "; or ".join(fixes)
    both = least(b.max_registers, reg_top, lambda r: keeps(r, smem_top))
    if both is not None:
        smem = least(b.max_smem_bytes, smem_top, lambda m: keeps(both, m))
        return (f"{head}; budget.max_registers {b.max_registers} and budget.max_smem_bytes {b.max_smem_bytes} both "
                f"bind: budget.max_registers {both} with budget.max_smem_bytes {smem} keeps one")
    return (f"{head}, and would at any budget (budget.max_registers {reg_top}, budget.max_smem_bytes {smem_top}): "
            f"the hardware's limits bind ({profile.cite('registers_per_thread_max', 'smem_per_block_bytes')}"
            + (f"; CUDA's {STATIC_SMEM_PER_BLOCK} B of static shared memory for recurrent kernels other than "
               "bulk-staged ones" if spec.family == "recurrent" else "")
            + "); widen agents in the spec")


def built(plan: Any, candidates: str) -> Any:
    """`plan` (a SpecPlan or the plan cache's plain-data form) reduced to what a `candidates` build compiles
    (kda2.artifact.manifest.CANDIDATE_SETS): "all" returns it as it is; "routed" keeps, in library index order, the
    variants the dispatch rows route to and every variant the library launches in their place — for a state layout
    with a routed chunk variant that has no fold, the layout's first that runs the exact split (a split call goes
    there, kda2_fwd) — each dispatch row's index and candidate list rewritten to them."""
    check_candidates(candidates)
    if candidates == "all":
        return plan
    keep = {d["variant"] for d in plan.dispatch} | {d["fallback"] for d in plan.dispatch if d.get("fallback")}
    for layout in {pv.config["state_layout"] for pv in plan.variants}:
        mine = [pv for pv in plan.variants if pv.config["state_layout"] == layout]
        if any(pv.id in keep and not splits(pv.config) for pv in mine):
            first = next((pv for pv in mine if splits(pv.config)), None)   # none in a recurrent plan
            if first is not None:
                keep.add(first.id)
    variants = tuple(pv for pv in plan.variants if pv.id in keep)
    index = {pv.id: i for i, pv in enumerate(variants)}
    dispatch = tuple({**d, "index": index[d["variant"]], "fallback_index": index.get(d.get("fallback"), -1),
                      "candidates": [c for c in d["candidates"] if c in keep]} for d in plan.dispatch)
    if dataclasses.is_dataclass(plan):
        return dataclasses.replace(plan, variants=variants, dispatch=dispatch)
    out = copy.copy(plan)
    out.variants, out.dispatch = variants, dispatch
    return out


def plan_all(specs: Sequence[Spec], rules: Sequence[Rule],
             locks: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None,
             profiles: Mapping[str, Profile] | None = None, *, every_spec: bool = True,
             splits: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None,
             times: Mapping[str, Mapping[str, Mapping[str, Mapping[str, float]]]] | None = None
             ) -> tuple[list[SpecPlan], list[str]]:
    """Plans for every (spec, arch), plus warnings: rules that match no proposed variant, stale tuning records.

    `locks`: {spec name: {arch: {"<layout>:<bucket>": variant id}}} (see kda2.plan.lock.read_lock); `splits`: {spec
    name: {arch: {"<layout>:<bucket>:<class>": segments}}} (kda2.plan.lock.tuned_splits); `times`: {spec name: {arch:
    {"<layout>:<bucket>:<class>": {variant id: us}}}} (kda2.plan.lock.class_times);
    `profiles`: {name: Profile} (default: profiles/), each spec's targets resolved in it; `every_spec`: False when
    `specs` is a subset of the repository's (a rule may match only specs left out, so none is called unmatched).
    """
    locks = locks or {}
    profiles = load_profiles() if profiles is None else profiles
    splits, times = splits or {}, times or {}
    plans = [plan_spec(s, arch, rules, locks.get(s.name, {}).get(arch), profile=hw,
                       tuned_splits=splits.get(s.name, {}).get(arch), tuned_times=times.get(s.name, {}).get(arch))
             for s in specs for arch, hw in resolve_targets(s, dict(profiles)).items()]
    configs = [c for p in plans for c in p.considered]
    warnings = [f"{r.path}: rule {r.id:04d} matches no current variant (kept, but it changes nothing)"
                for r in (unmatched(rules, configs) if every_spec else ())]
    return plans, warnings + [w for p in plans for w in p.warnings]
