"""`kda2 tune`: on a GPU, check every surviving candidate of both families against the fp64 reference,
time it, and record the fastest correct one per dispatch row in `tuning/<spec>.<profile>.json`.

Per built library of every candidate (build/_candidates/<spec>/<arch>, `kda2 build --candidates all`): the
candidates of each dispatch row (state layout, seq_len bucket) are ranked and pruned by the static model
(kda2.plan.model: ptxas resources + the target's hardware profile; spills, register or smem overflow and
occupancy below the floor are pruned with the reason recorded), then each survivor is
  1. launched once on a small case and compared with kda2.reference (fp64, token by token): relative L2 of
     o and the final state <= 5e-3, all finite (outputs are poisoned with NaN first);
  2. timed at every batch class of its bucket (kda2.plan.model.workloads; each class's fastest routes the
     class's dispatch row, the first class's is the row's headline): CUDA events around each call, median,
     inputs rotating over enough sets that they do not fit in L2.
Every finished candidate is kept in `tuning/<spec>.<profile>.partial.json`, so an interrupted run (Ctrl-C,
--time-limit) resumes where it stopped; the record is written when every row is done. Failures (wrong
result, launch error, spill, slower than the row's incumbent by more than --margin) are appended with their
evidence to `tuning/failures/<spec>.<profile>.jsonl`, from which `kda2 rules propose` writes rules.

With several GPUs and `distributed` (Dask) importable, candidates spread over one worker process per GPU;
otherwise they run one after another on the current GPU. `--dry-run` lists the candidates, the model's
estimates and what it prunes without a GPU.
"""
from __future__ import annotations

import datetime as _dt
import itertools
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from kda2.artifact.atomic import write_text
from kda2.artifact.manifest import DEFAULT_BUILD_DIRS
from kda2.plan.lock import RECORD_SCHEMA, partial_path, read_baselines, record_path
from kda2.plan.model import (DECODE_MAX_T, Resources, estimate, estimate_resources, prune_reason, resources_from_ptxas,
                             spearman, workloads)

#: The accuracy bar (docs/DESIGN.md §1.1): relative L2 error of o and of the final state vs float64.
MAX_REL_L2 = 5e-3
#: Sequences of the persistent kernels' second check (H = 2, HV = 4, T = 1): 1536 tiles or more, several per
#: resident CTA on a GPU of a few hundred slots, so every CTA walks its tile loop.
PERSISTENT_CHECK_N = 384
#: A candidate slower than its row's incumbent by more than this fraction is recorded as a failure.
DEFAULT_MARGIN = 0.5
TUNABLE_FAMILIES = ("recurrent", "chunk")


class TuneError(RuntimeError):
    """A problem the user can fix (no GPU, no build, unknown profile); str() is one line."""


class TuneInterrupted(TuneError):
    """Ctrl-C during the timing: str() names the partial record that keeps what was measured."""


def _seconds_ok(value: float) -> bool:
    return math.isfinite(value) and value > 0


def time_limit_arg(text: str) -> float:
    """argparse type of --time-limit: seconds, a finite number > 0 (leave the option out for no limit)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not _seconds_ok(value):
        raise argparse.ArgumentTypeError(f"{text!r}: allowed: a number of seconds > 0 (leave --time-limit out "
                                         "for no limit)")
    return value


def margin_arg(text: str) -> float:
    """argparse type of --margin: a fraction >= 0 (0: any candidate slower than the incumbent is a failure; a
    negative one made every candidate a failure, NaN none)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed: a fraction >= 0 (0.5: a candidate more than 50% slower "
                                         "than its row's incumbent is recorded as a failure)")
    return value


def workers_arg(text: str) -> int:
    """argparse type of --workers: a whole number of GPUs >= 1 (_executor ran 0 or less as 1, unsaid)."""
    from kda2.tools import count_arg

    return count_arg(text, "a whole number of GPUs >= 1 (1: no Dask; leave --workers out for every visible GPU)")


# ---- what to tune: candidates per dispatch row (CPU only) ------------------------------------------

@dataclass
class Task:
    spec: str
    arch: str
    profile: str
    family: str
    route: str                  # "<layout>:<bucket>"
    bucket: int
    variant: str
    index: int                  # the variant's index in the library (-1: not built, dry run from a spec)
    config: dict[str, Any]
    features: dict[str, Any]    # the spec's features (runtime options of chunk kernels live here)
    manifest: str | None
    resources: dict[str, Any]   # model input (ptxas or estimate)
    model: dict[str, Any]
    pruned: str | None = None
    incumbent: bool = False     # what the row routes to before this run
    # chunk: the classes of the bucket whose dispatch row the agents would split with this candidate routed,
    # {class: {"chains": the row's fewest chains, "segments": the agents' split}} (kda2.plan.agents.chunk row_split)
    splits: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class Group:
    """One library (or, in a dry run, one planned (spec, arch)) and its candidates."""
    spec: str
    arch: str
    profile: Any
    family: str
    manifest: str | None
    library_sha256: str | None
    tasks: list[Task] = field(default_factory=list)


def knobs(config: dict[str, Any]) -> dict[str, Any]:
    from kda2.spec.knobs import agent_knobs

    return agent_knobs(config)


def _profile_for(spec_name: str, arch: str, specs_dir: str, profiles_dir: str | None, profile: str | None):
    from kda2.plan.profile import ProfileError, default_profile, load_profiles, resolve_targets

    profiles = load_profiles(profiles_dir)
    if profile:
        if profile not in profiles:
            raise ProfileError(f"--profile {profile}: unknown; allowed: {', '.join(sorted(profiles))}")
        if profiles[profile].arch != arch:
            raise ProfileError(f"--profile {profile} is {profiles[profile].arch}, the library is {arch}")
        return profiles[profile]
    spec_file = Path(specs_dir) / f"{spec_name}.yaml"
    if spec_file.is_file():
        from kda2.spec.model import load_spec

        return resolve_targets(load_spec(spec_file), profiles)[arch]
    default = default_profile(profiles, arch)
    if default is None:
        raise ProfileError(f"no profile for {arch}: pass --profile or write profiles/<gpu>.yaml")
    return default


def _model(cfg: dict, res: Resources, hw: Any, bucket: int, budget: Any, step_ns: float | None = None):
    w = workloads(cfg["family"], bucket)[0]
    est = estimate(cfg, res, hw, w, step_ns)
    return {**est.as_dict(), "resources": asdict(res)}, prune_reason(cfg, res, hw, budget)


def groups_from_manifest(manifest: str | os.PathLike, *, specs_dir: str = "kernel_specs",
                         profiles_dir: str | None = None, profile: str | None = None,
                         tuning_dir: str = "tuning") -> Group:
    """The candidates of a built library, with ptxas resources and the model's estimate (no GPU)."""
    p = Path(manifest)
    path = p / "manifest.json" if p.is_dir() else p
    try:
        m = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise TuneError(f"{path}: no readable manifest ({e}); build every candidate first (`kda2 build --candidates all "
                        f"SPEC`, into {DEFAULT_BUILD_DIRS['all']}/SPEC/ARCH)") from None
    if not isinstance(m, dict) or m.get("family") not in TUNABLE_FAMILIES:
        raise TuneError(f"{path}: family {m.get('family') if isinstance(m, dict) else None!r}; allowed: "
                        f"{', '.join(TUNABLE_FAMILIES)}")
    missing = [k for k in ("spec", "arch", "variants", "dispatch", "library") if k not in m]
    if missing:
        raise TuneError(f"{path}: not a kda2 manifest (missing {', '.join(missing)}); rebuild it (`kda2 build "
                        f"--candidates all SPEC`)")
    if m.get("candidates", "all") != "all":
        where = f"{DEFAULT_BUILD_DIRS['all']}/{m['spec']}/{m['arch']}"
        raise TuneError(f"{path}: built with CANDIDATES={m.get('candidates')} ({len(m['variants'])} variants: what the "
                        f"dispatch routes to); tuning times every candidate: build them with `kda2 build --candidates "
                        f"all {m['spec']}` (or `scons CANDIDATES=all`) and tune {where}")
    cached = _planned(m) or _from_plan_cache(path, m["spec"], m["arch"])
    if profile and cached is not None:
        # another profile than the plan's: the build's validated copy of it, with the plan's budget (no pydantic);
        # a cache without the copies re-reads the profiles below
        views = _cached_profiles(path)
        if views is None:
            cached = None
        elif profile not in views:
            raise TuneError(f"--profile {profile}: unknown; allowed: {', '.join(sorted(views))}")
        elif views[profile].arch != m["arch"]:
            raise TuneError(f"--profile {profile} is {views[profile].arch}, the library is {m['arch']}")
        else:
            cached = (views[profile], cached[1])
    if cached is not None:  # what the library was planned with (needs no pydantic: a GPU host may lack it)
        hw, budget = cached
    else:
        try:
            hw, budget = (_profile_for(m["spec"], m["arch"], specs_dir, profiles_dir, profile),
                          _budget(m["spec"], specs_dir))
        except ModuleNotFoundError as e:  # a GPU host with the runtime only: re-planning needs kda2[build]
            raise TuneError(f"{path}: the manifest names no plan (built before manifests kept it), "
                            f"{_plan_cache(path)} holds no plan of {m['spec']} / {m['arch']}, and re-planning here "
                            f"needs {e.name} (kda2[build]); rebuild it with one `kda2 build --candidates all` run "
                            "(any tree: the new manifest carries its plan), or install kda2[build]") from None
    prior = read_baselines(record_path(m["spec"], hw.name, tuning_dir)).get(m["arch"], {})
    by_id = _check_dispatch(path, m)
    lib = m.get("library")
    g = Group(m["spec"], m["arch"], hw, m["family"], str(path), lib.get("sha256") if isinstance(lib, dict) else None)
    for d in m["dispatch"]:
        if d.get("class") not in (None, _primary(m["family"], d["bucket"])):
            continue  # a bucket's other batch classes share its candidates: one task each
        key = f"{d['state_layout']}:{d['bucket']}"
        incumbent = prior.get(key, {}).get("variant") or d["variant"]
        rows = [r for r in m["dispatch"] if r["state_layout"] == d["state_layout"] and r["bucket"] == d["bucket"]]
        for vid in d["candidates"]:
            v = by_id[vid]
            cfg = v["config"]
            res = _built_resources(path.parent, v, cfg)
            model, pruned = _model(cfg, res, hw, d["bucket"], budget)
            g.tasks.append(Task(m["spec"], m["arch"], hw.name, m["family"], key, d["bucket"], vid, v["index"], cfg,
                                dict(m.get("features", {})), str(path), asdict(res), model, pruned,
                                incumbent=vid == incumbent, splits=_split_rows(cfg, hw, rows)))
    fit_steps(g, record_path(m["spec"], hw.name, tuning_dir), budget)
    return g


def _check_dispatch(path: Path, m: dict) -> dict[str, dict]:
    """{id: variant} of a manifest whose every dispatch row names its route and candidates among its variants; else
    a TuneError naming the row and the id (a manifest edited or damaged after the build: the build writes both)."""
    rebuild = f"rebuild it (`kda2 build --candidates all {m['spec']}`)"
    if not (isinstance(m["variants"], list) and all(isinstance(v, dict) and "id" in v for v in m["variants"])
            and isinstance(m["dispatch"], list)):
        raise TuneError(f"{path}: variants and dispatch must be lists, each variant with an id; {rebuild}")
    by_id = {v["id"]: v for v in m["variants"]}
    for i, d in enumerate(m["dispatch"]):
        if not (isinstance(d, dict) and all(k in d for k in ("state_layout", "bucket", "variant", "candidates"))
                and isinstance(d["candidates"], list)):
            raise TuneError(f"{path}: dispatch row {i} is not a dispatch row (needs state_layout, bucket, variant, "
                            f"candidates: a list); {rebuild}")
        for vid in [d["variant"], *d["candidates"]]:
            if vid not in by_id:
                raise TuneError(f"{path}: dispatch row {i} ({d['state_layout']}<={d['bucket']}"
                                f"{'/' + str(d['class']) if d.get('class') else ''}) names variant {vid!r}, which "
                                f"is not among its {len(by_id)} variants (the manifest was edited or damaged after "
                                f"the build); {rebuild}")
    return by_id


def _split_rows(cfg: dict, hw: Any, rows: list[dict]) -> dict[str, dict[str, int]]:
    """The rows of one bucket the agents would split with `cfg` routed: {class: {"chains", "segments"}}."""
    if cfg["family"] != "chunk":
        return {}
    from kda2.plan.agents.chunk import row_split

    out = {}
    for r in rows:
        segments, _ = row_split(cfg, hw, int(r["bucket"]), int(r.get("min_chains", 0)))
        if segments > 1:
            out[r.get("class") or _primary("chunk", r["bucket"])] = {"chains": max(int(r.get("min_chains", 0)), 1),
                                                                      "segments": segments}
    return out


def _primary(family: str, bucket: int) -> str:
    """The batch class a bucket's candidates are ranked, pruned and checked for slowness at."""
    return workloads(family, int(bucket))[0].name


def _plan_cache(manifest: Path) -> Path:
    """build/.kda2/plan-cache.json of the build tree holding build/<spec>/<arch>/manifest.json."""
    return manifest.parent.parent.parent / ".kda2" / "plan-cache.json"


def _planned(m: dict) -> tuple[Any, Any] | None:
    """(profile, budget) the library was planned with, from its manifest's "planned" (absent before 2026-12-05)."""
    from types import SimpleNamespace

    from kda2.plan.profile_view import ProfileView

    p = m.get("planned")
    try:
        return ProfileView(p["profile"]), SimpleNamespace(**p["budget"])
    except (KeyError, TypeError):
        return None


def _from_plan_cache(manifest: Path, spec: str, arch: str) -> tuple[Any, Any] | None:
    """(profile, budget) of the plan that built this library, from build/.kda2/plan-cache.json, if present."""
    from types import SimpleNamespace

    from kda2.plan.profile_view import ProfileView

    try:
        data = json.loads(_plan_cache(manifest).read_text())
        p = next(p for p in data["plans"] + data.get("other_plans", [])
                 if p["spec"]["name"] == spec and p["arch"] == arch)
        if "gpu" not in p["profile"]:  # a cache written before profiles were kept whole
            return None
        return ProfileView(p["profile"]), SimpleNamespace(**p["spec"]["budget"])
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None


def _cached_profiles(manifest: Path) -> dict[str, Any] | None:
    """{name: ProfileView} of every profile the build validated (build/.kda2/plan-cache.json "profiles"), or None."""
    from kda2.plan.profile_view import ProfileView

    try:
        data = json.loads(_plan_cache(manifest).read_text())
        return {name: ProfileView(p) for name, p in data["profiles"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _budget(spec_name: str, specs_dir: str) -> Any:
    """The spec's budget (pruning honours allow_spills and max_registers); without the spec file, what the
    build accepted: it already refused spills and register overruns the spec did not allow."""
    from types import SimpleNamespace

    spec_file = Path(specs_dir) / f"{spec_name}.yaml"
    if spec_file.is_file():
        from kda2.spec.model import load_spec

        return load_spec(spec_file).budget
    return SimpleNamespace(allow_spills=True, max_registers=255)


def _built_resources(root: Path, v: dict, cfg: dict) -> Resources:
    """ptxas's resources (the manifest inlines resources.json) + the dynamic smem plan.json sized."""
    res = v.get("resources")
    if not isinstance(res, dict):
        try:
            res = json.loads((root / v.get("resources_path", v.get("resources", ""))).read_text())
        except (OSError, ValueError, TypeError):
            return estimate_resources(cfg)
    dyn = 0
    try:
        plan = json.loads((root / v["plan"]).read_text())
        dyn = int(plan.get("state_smem_bytes", plan.get("smem_bytes", 0)))
    except (OSError, ValueError, KeyError):
        pass
    return resources_from_ptxas(cfg, res, dyn)


def groups_from_spec(spec_path: str | os.PathLike, *, rules_dir: str = "rules", profiles_dir: str | None = None,
                     profile: str | None = None, tuning_dir: str = "tuning") -> list[Group]:
    """A dry run before any build: the planner's candidates with estimated resources."""
    from kda2.plan.lock import read_spec_baselines, routes
    from kda2.plan.planner import plan_spec
    from kda2.plan.profile import load_profiles, resolve_targets
    from kda2.spec.model import load_spec
    from kda2.spec.rules import load_rules

    spec = load_spec(spec_path)
    profiles = load_profiles(profiles_dir)
    targets = resolve_targets(spec, profiles)
    if profile:
        if profile not in profiles:
            raise TuneError(f"--profile {profile}: unknown; allowed: {', '.join(sorted(profiles))}")
        targets = {profiles[profile].arch: profiles[profile]}
    rules = load_rules(rules_dir, profiles_dir)
    tuned = routes(read_spec_baselines(spec.name, targets, tuning_dir))
    out = []
    for arch, hw in targets.items():
        plan = plan_spec(spec, arch, rules, tuned.get(arch), profile=hw)
        by_id = {v.id: v for v in plan.variants}
        g = Group(spec.name, arch, hw, spec.family, None, None, [])
        for d in plan.dispatch:
            if d["class"] != _primary(spec.family, d["bucket"]):
                continue
            key = f"{d['state_layout']}:{d['bucket']}"
            rows = [r for r in plan.dispatch if r["state_layout"] == d["state_layout"] and r["bucket"] == d["bucket"]]
            for vid in d["candidates"]:
                cfg = by_id[vid].config
                res = estimate_resources(cfg)
                model, pruned = _model(cfg, res, hw, d["bucket"], spec.budget)
                g.tasks.append(Task(spec.name, arch, hw.name, spec.family, key, d["bucket"], vid, -1, cfg,
                                    spec.canonical()["features"], None, asdict(res), model, pruned,
                                    incumbent=vid == d["variant"], splits=_split_rows(cfg, hw, rows)))
        fit_steps(g, record_path(spec.name, hw.name, tuning_dir), spec.budget)
        out.append(g)
    return out


def fit_steps(g: Group, record_file: Path, budget: Any) -> None:
    """Re-estimate each row's candidates with the per-step time the previous record implies (the median over
    its measured candidates of (measured - launch) / (waves x steps)): the model's serial bound then rests on
    this GPU's measured step, and only waves and steps separate the candidates."""
    import statistics

    try:
        rec = json.loads(record_file.read_text())
        rows = rec["routes"] if rec.get("schema") == RECORD_SCHEMA else {}
    except (OSError, ValueError, KeyError, TypeError):
        return
    from kda2.plan.model import Resources, step_ns_from_record

    by_route: dict[str, list[Task]] = {}
    for t in g.tasks:
        by_route.setdefault(t.route, []).append(t)
    for key, tasks in by_route.items():
        measured = rows.get(key, {}).get("candidates", {})
        w = workloads(g.family, tasks[0].bucket)[0]
        if rows.get(key, {}).get("shape", {}).get("T") not in (None, w.T):
            continue  # measured at another shape: its step does not transfer
        steps = [step_ns_from_record(t.config, Resources(**t.resources), g.profile, w, measured[t.variant]["us"])
                 for t in tasks if measured.get(t.variant, {}).get("us")]
        if not steps:
            continue
        step = statistics.median(steps)
        for t in tasks:
            t.model, _ = _model(t.config, Resources(**t.resources), g.profile, t.bucket, budget, step)
            t.model["step_from"] = str(record_file)


def describe(g: Group, log: Callable[[str], None] = print) -> None:
    """The dry-run listing: per row, each candidate's knobs, the model's estimate, or why it is pruned."""
    rows: dict[str, list[Task]] = {}
    for t in g.tasks:
        rows.setdefault(t.route, []).append(t)
    live = sum(1 for t in g.tasks if not t.pruned)
    log(f"{g.spec} / {g.arch} on {g.profile.name} ({g.profile.source}): {len(g.tasks)} candidates in {len(rows)} "
        f"rows, {live} to time, {len(g.tasks) - live} pruned"
        + (f"  [{g.manifest}]" if g.manifest else "  [not built: resources estimated]"))
    log("  * marks each row's current route; the model's estimate is at the row's first batch class (its step time "
        "from the tuning record where one measured the row: `step from record`), `kda2 plan --reasons` at the "
        "agents' design shape")
    for key, tasks in rows.items():
        classes = ", ".join(f"{w.name} N={w.N} " + (f"lengths={list(w.lengths)}" if w.lengths else f"T={w.T}")
                            + f" H={w.H}" for w in workloads(g.family, tasks[0].bucket))
        log(f"  {key}  (batch classes: {classes})")
        for name, chains in {n: r["chains"] for t in tasks for n, r in t.splits.items()}.items():
            log(f"    {name}: each candidate's split timed too, at N=1 T={tasks[0].bucket} H={chains} (the row's fewest "
                f"chains), in the segments listed")
        for t in sorted(tasks, key=lambda t: t.model["us"]):
            kn = " ".join(f"{k}={v}" for k, v in knobs(t.config).items() if k != "state_layout")
            what = f"PRUNED: {t.pruned}" if t.pruned else (
                f"model {t.model['us']:9.1f} us ({t.model['bound']}, {t.model['ctas_per_sm']} CTA/SM, "
                f"{t.model['waves']} waves{', step from record' if t.model.get('step_from') else ''})" + "".join(f"; {n} split {'/'.join(map(str, split_choices(r['segments'])))}"
                                                       for n, r in t.splits.items()))
            log(f"    {t.variant} {'*' if t.incumbent else ' '} {kn:<62} {what}")


# ---- measuring one candidate (runs on a GPU, in this process or a Dask worker) ----------------------

def _case(torch, abi, cfg: dict, feats: dict, N: int, T: int, H: int, HV: int, seed: int,
          pool: bool = False, split: int = 0, lengths: Sequence[int] | None = None) -> dict:
    """Random inputs of one shape in the library's layout (outputs poisoned), plus the packed arguments. pool: the
    states updated in place through state_indices (rows 0..N-1), as a serving step runs decode (the benchmark's
    decode rows too); else h0 in, ht out to a separate buffer. lengths: a varlen packing of N sequences (device
    cu_seqlens, T its longest) instead of N dense sequences of T tokens."""
    from kda2.artifact.abi import GATE_MODES

    K, V = cfg["k"], cfg["v"]
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen, device="cuda").to(dtype)

    modes = cfg["gate_modes"]
    mode = next(m for m in ("softplus", "lower_bound", "precomputed") if m in modes)
    v_first = cfg["state_layout"] == "v_first"
    l2norm, beta_sig = bool(feats.get("qk_l2norm")), bool(feats.get("beta_sigmoid"))
    c: dict[str, Any] = {"mode": mode, "v_first": v_first, "N": N, "T": T, "H": H, "HV": HV, "K": K,
                         "l2norm": l2norm, "beta_sigmoid": beta_sig}
    tokens = sum(lengths) if lengths else N * T
    c["q"], c["k"] = randn(1, tokens, H, K, dtype=torch.bfloat16), randn(1, tokens, H, K, dtype=torch.bfloat16)
    c["v"] = randn(1, tokens, HV, V, dtype=torch.bfloat16)
    # realistic gates (DESIGN §1.1): raw gate ~ randn through the in-kernel activation, or logsigmoid/16
    c["g"] = randn(1, tokens, HV, K) if mode != "precomputed" else \
        torch.nn.functional.logsigmoid(randn(1, tokens, HV, K)) / 16
    c["beta"] = randn(1, tokens, HV) if beta_sig else torch.sigmoid(randn(1, tokens, HV))
    c["A_log"], c["dt_bias"] = randn(HV) * 0.5, randn(HV * K)
    c["h0"] = randn(N, HV, *((V, K) if v_first else (K, V))) * 0.1
    c["o"] = torch.full_like(c["v"], float("nan"))
    c["ht"] = c["h0"] if pool else torch.full_like(c["h0"], float("nan"))
    flags = (abi.FLAG_HAS_A_LOG | abi.FLAG_HAS_DT_BIAS) if mode != "precomputed" else 0
    flags |= abi.FLAG_QK_L2NORM if l2norm else 0
    flags |= abi.FLAG_BETA_SIGMOID if beta_sig else 0
    a = abi.KDA2RecurrentArgs()
    a.q, a.k, a.v, a.g, a.beta = (c[n].data_ptr() for n in ("q", "k", "v", "g", "beta"))
    a.A_log, a.dt_bias, a.o = c["A_log"].data_ptr(), c["dt_bias"].data_ptr(), c["o"].data_ptr()
    a.h0, a.ht = c["h0"].data_ptr(), c["ht"].data_ptr()
    a.cu_seqlens = a.state_indices = None
    if lengths:
        c["cu"] = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int64, device="cuda")
        a.cu_seqlens = c["cu"].data_ptr()
    if pool:
        c["idx"] = torch.arange(N, dtype=torch.int32, device="cuda")
        a.state_indices = c["idx"].data_ptr()
    a.N, a.T, a.H, a.HV = N, tokens if lengths else T, H, HV
    a.scale, a.lower_bound = K ** -0.5, -5.0
    a.gate_mode, a.flags, a.state_v_first = GATE_MODES[mode], flags, int(v_first)
    if cfg["family"] == "chunk":  # two kernels through a device workspace (kda2/abi.h)
        # split 0: the library's choice, which gives way to a workspace of the slots only (unsplit)
        nbytes = abi.chunk_workspace_bytes(N, a.T, HV, K, V, bool(lengths), max(split, 1))
        a.split = split
        c["ws"] = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        a.workspace, a.workspace_bytes = c["ws"].data_ptr(), nbytes
    else:
        a.workspace, a.workspace_bytes = None, 0
    a.max_seqlen = T
    c["args"], c["flags"] = a, flags
    c["bytes"] = sum(c[n].numel() * c[n].element_size() for n in ("q", "k", "v", "g", "beta", "h0", "o", "ht"))
    return c


def _reference_error(c: dict) -> float:
    import numpy as np

    from kda2.reference import recurrent_kda_ref, relative_l2

    def np64(t):
        return t.detach().double().cpu().numpy()

    B, T = c["N"], c["T"]
    o, ht = recurrent_kda_ref(
        np64(c["q"]).reshape(B, T, c["H"], -1), np64(c["k"]).reshape(B, T, c["H"], -1),
        np64(c["v"]).reshape(B, T, c["HV"], -1), np64(c["g"]).reshape(B, T, c["HV"], -1),
        np64(c["beta"]).reshape(B, T, c["HV"]), scale=c["K"] ** -0.5, initial_state=np64(c["h0"]),
        output_final_state=True, use_qk_l2norm_in_kernel=c["l2norm"],
        use_gate_in_kernel=c["mode"] != "precomputed", use_beta_sigmoid_in_kernel=c["beta_sigmoid"],
        A_log=np64(c["A_log"]), dt_bias=np64(c["dt_bias"]),
        lower_bound=-5.0 if c["mode"] == "lower_bound" else None, state_v_first=c["v_first"])
    got_o, got_h = np64(c["o"]).reshape(o.shape), np64(c["ht"])
    if not (np.isfinite(got_o).all() and np.isfinite(got_h).all()):
        return float("inf")
    return max(relative_l2(got_o, o), relative_l2(got_h, ht))


def measure(task: dict, quick: bool = False, l2_bytes: int = 50 << 20) -> dict:
    """Check one candidate against the reference and time it at each batch class of its bucket.

    Returns {"error", "us", "classes": {class: us}} or {"failure": kind, "error"?, "detail"}; never raises
    for a kernel problem (a launch error is a result, so one bad candidate does not end the run)."""
    import torch

    from kda2.bench.timing import Timer
    from kda2.runtime import abi
    from kda2.runtime.errors import KDA2LaunchError
    from kda2.runtime.loader import load

    lib = load(task["manifest"])
    lib.preload(torch.cuda.current_device())
    stream = torch.cuda.current_stream().cuda_stream
    cfg, idx, feats = task["config"], task["index"], task["features"]

    def launch_failure(e: RuntimeError, shape: dict, what: str = "") -> dict:
        """A launch's failure record: the library refused it (KDA2LaunchError), or a fault inside the kernel, after
        which the CUDA context is lost for every later launch (fatal: nothing more can run in this process)."""
        if isinstance(e, KDA2LaunchError):
            return {"failure": "launch_error", "detail": what + str(e), "shape": shape}
        return {"failure": "launch_error", "fatal": True, "detail": what + " ".join(str(e).split())[:300], "shape": shape}

    def check(shape: dict, seed: int, note: str = "") -> tuple[float, dict | None]:
        """(relative L2 error, None), or (nan, the failure record) of one launch at `shape` vs the reference."""
        try:
            case = _case(torch, abi, cfg, feats, seed=seed, **shape)
            lib.launch_variant(idx, case["args"], stream)
            torch.cuda.synchronize()
        except RuntimeError as e:  # KDA2LaunchError included
            return math.nan, launch_failure(e, shape)
        e = _reference_error(case)
        if not e <= MAX_REL_L2:
            return e, {"failure": "wrong_result", "error": e, "detail": f"relative L2 {e:.3e} > {MAX_REL_L2} vs the "
                       f"float64 reference{note}", "shape": shape}
        return e, None

    # small check: GVA (HV = 2H), two sequences; chunk: two full chunks and a partial one
    T_check = min(task["bucket"], 40) if cfg["family"] == "recurrent" else 150
    err, failure = check({"N": 2, "T": T_check, "H": 2, "HV": 4}, 7 + idx)
    if failure:
        return failure
    if cfg.get("persistent"):
        # The small check is fewer tiles than resident CTAs: one tile each. A persistent kernel's loop over tiles
        # (and its next-tile copies) is only checked where the tiles are several times the GPU's slots.
        loop_err, failure = check({"N": PERSISTENT_CHECK_N, "T": 1, "H": 2, "HV": 4}, 8 + idx,
                                  " (tiles > resident CTAs)")
        if failure:
            return failure
        err = max(err, loop_err)
    timer = Timer(torch)
    classes: dict[str, float] = {}
    # Decode buckets are timed as serving runs them: the state pool read and written in place (an in-place 128 MiB
    # read + write reaches less of the copy bandwidth than a copy between two buffers, and not by the same amount
    # for every kernel form: H200, experiments/2026-12-01-decode/copy_ceiling.cu; a bulk-staged kernel tuned out of
    # place won N = 64 by 0.3 % and lost it by 4 % in place, bench/results/h200-2026-12-01-decode/call6)
    pool = cfg["family"] == "recurrent" and task["bucket"] <= DECODE_MAX_T
    for w in workloads(cfg["family"], task["bucket"]):
        one = _case(torch, abi, cfg, feats, N=w.N, T=w.T, H=w.H, HV=w.H, seed=100, pool=pool, lengths=w.lengths)
        # enough input sets that one round of them does not fit in L2 (2x its size), at most 8 (graph-timed
        # one-sequence steps: 32, about what the benchmark's D1 rotates through)
        n_sets = max(2, min(32 if w.graph else 8, math.ceil(2 * l2_bytes / max(one["bytes"], 1))))
        cases = [one] + [_case(torch, abi, cfg, feats, N=w.N, T=w.T, H=w.H, HV=w.H, seed=101 + r, pool=pool,
                               lengths=w.lengths) for r in range(n_sets - 1)]
        try:
            if w.graph:  # captured on the timer's side stream: each launch asks for the stream it runs on
                st = timer.graph(lambda i: lib.launch_variant(idx, cases[i]["args"],
                                                              torch.cuda.current_stream().cuda_stream),
                                 n_sets, replays=5 if quick else 20)
            else:
                st = timer.kernel(lambda i: lib.launch_variant(idx, cases[i]["args"], stream), n_sets,
                                  reps=10 if quick else 40)
        except RuntimeError as e:
            return launch_failure(e, w.as_dict())
        classes[w.name] = round(st.median_ms * 1e3, 2)
        del cases, one
    first = workloads(cfg["family"], task["bucket"])[0].name
    out = {"error": err, "us": classes[first], "classes": classes}
    # the split rows: this candidate at the row's fewest chains (one sequence of the bucket's length), split as the
    # agents plan it, at half that and unsplit (explicit splits: the library's own choice is what they bound)
    splits: dict[str, dict[str, Any]] = {}
    for name, r in task.get("splits", {}).items():
        shape = {"N": 1, "T": task["bucket"], "H": r["chains"]}
        timed: dict[str, float] = {}
        for n_seg in split_choices(r["segments"]):
            sets = [_case(torch, abi, cfg, feats, N=1, T=shape["T"], H=r["chains"], HV=r["chains"], seed=200 + i,
                          split=n_seg) for i in range(2)]
            try:
                st = timer.kernel(lambda i: lib.launch_variant(idx, sets[i]["args"], stream), len(sets),
                                  reps=10 if quick else 40)
            except RuntimeError as e:
                return launch_failure(e, shape, f"split {n_seg}: ")
            timed[str(n_seg)] = round(st.median_ms * 1e3, 2)
            del sets
        splits[name] = {"segments": r["segments"], "shape": shape, "us": timed}
    if splits:
        out["splits"] = splits
    return out


def split_choices(segments: int) -> list[int]:
    """What the tuner times a split row at: the agents' segments, half that where the library would still split,
    and unsplit (kda2.plan.smem SPLIT_MIN_SEGMENTS)."""
    from kda2.plan.smem import SPLIT_MIN_SEGMENTS

    return sorted({segments, *([segments // 2] if segments // 2 >= SPLIT_MIN_SEGMENTS else []), 1}, reverse=True)


# ---- running: progress, resume, failures, the record ------------------------------------------------

def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name()


def _torch_version() -> str:
    import torch

    return torch.__version__


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _fmt_s(s: float) -> str:
    s = int(max(s, 0))
    return f"{s // 60}:{s % 60:02d}"


def _executor(n_tasks: int, workers: int | None, log):
    """(submit-all function, description): Dask over every GPU when it is importable and there are several."""
    import torch

    n_gpu = torch.cuda.device_count()
    want = n_gpu if workers is None else workers
    if want > 1 and n_tasks > 1:
        try:
            from distributed import Client, LocalCluster, as_completed
        except ImportError:
            log(f"kda2 tune: {n_gpu} GPUs but `distributed` is not importable (pip install 'kda2[tune]'); "
                "running on one GPU")
        else:
            cluster = LocalCluster(n_workers=min(want, n_gpu), threads_per_worker=1, processes=True)
            client = Client(cluster)
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", ",".join(map(str, range(n_gpu)))).split(",")
            for i, addr in enumerate(sorted(client.scheduler_info()["workers"])):
                client.run(_pin_gpu, visible[i % len(visible)], workers=[addr])

            def run_all(tasks, quick, l2):
                futs = {client.submit(measure, asdict(t), quick, l2, pure=False): t for t in tasks}
                try:
                    for fut in as_completed(futs):
                        yield futs[fut], fut.result()
                finally:
                    for fut in futs:
                        fut.cancel()

            def close():
                client.close()
                cluster.close()

            return run_all, close, f"{min(want, n_gpu)} Dask workers, one per GPU"

    def run_local(tasks, quick, l2):
        for t in tasks:
            yield t, measure(asdict(t), quick, l2)

    return run_local, (lambda: None), f"one GPU ({_gpu_name()})"


def _pin_gpu(device: str) -> None:
    """In a fresh Dask worker, before it touches CUDA: see only its own GPU."""
    os.environ["CUDA_VISIBLE_DEVICES"] = device


def _failure(g: Group, t: Task, kind: str, numbers: dict, detail: str, gpu: str, command: str) -> dict:
    import hashlib

    body = {"kind": kind, "spec": g.spec, "profile": g.profile.name, "arch": g.arch, "family": g.family,
            "gpu": gpu, "route": t.route, "bucket": t.bucket, "variant": t.variant, "knobs": knobs(t.config),
            "config": t.config, "numbers": numbers, "detail": detail, "command": command,
            "library_sha256": g.library_sha256}
    body["id"] = hashlib.sha256(json.dumps({k: v for k, v in body.items() if k != "command"}, sort_keys=True,
                                           default=str).encode()).hexdigest()[:12]
    body["date"] = _now()
    return body


def append_failures(path: Path, records: list[dict]) -> None:
    """Append records to a failure log (jsonl), skipping ids it already holds (a resumed run re-reports)."""
    if not records:
        return
    have = set()
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                have.add(json.loads(line)["id"])
            except (ValueError, KeyError, TypeError):
                continue
    new = [r for r in records if r["id"] not in have]
    if new:
        text = path.read_text() if path.is_file() else ""
        write_text(path, text + "".join(json.dumps(r, sort_keys=True) + "\n" for r in new))


def tune_group(g: Group, *, quick: bool = False, tuning_dir: str = "tuning", record: str | None = None,
               margin: float = DEFAULT_MARGIN, deadline: float | None = None, workers: int | None = None,
               command: str = "kda2 tune", explicit_profile: bool = False,
               log: Callable[[str], None] = print) -> dict | None:
    """Tune one library; returns the written record, or None when stopped by the deadline (partial kept).

    The record is named after the profile, so timing on another GPU than the profile describes would file
    one GPU's numbers under another's name: refused unless the profile was chosen with --profile."""
    gpu = _gpu_name()
    if g.profile.gpu.lower() not in gpu.lower() and gpu.lower() not in g.profile.gpu.lower():
        msg = (f"this GPU is {gpu!r} but {g.spec}/{g.arch} targets profile {g.profile.name} ({g.profile.gpu!r})")
        if not explicit_profile:
            raise TuneError(f"{msg}; pass --profile NAME (a profile of {g.arch} for this GPU) to record under it")
        log(f"kda2 tune: warning: {msg}; recording under {g.profile.name} as --profile asks")
    part_path = partial_path(g.spec, g.profile.name, tuning_dir)
    done: dict[str, dict[str, Any]] = {}
    if part_path.is_file():
        try:
            part = json.loads(part_path.read_text())
            if not isinstance(part, dict):
                raise ValueError(f"a JSON {type(part).__name__}, not an object")
            if part.get("library_sha256") == g.library_sha256:
                done, again = _resumable(part.get("done", {}))
                log(f"kda2 tune: resuming {part_path}: {sum(map(len, done.values()))} candidates already measured")
                if again:
                    log(f"kda2 tune: {part_path}: {len(again)} entr{'y' if len(again) == 1 else 'ies'} without a "
                        f"time ('us') will be measured again: {', '.join(again)}")
            else:
                log(f"kda2 tune: {part_path} is of another build of the library; starting afresh")
        except (OSError, ValueError) as e:
            done = {}
            log(f"kda2 tune: {part_path} is unreadable ({e}); starting afresh")
    for t in g.tasks:  # pruned ones are settled without a GPU
        if t.pruned:
            done.setdefault(t.route, {})[t.variant] = {"us": None, "pruned": t.pruned, "model_us": t.model["us"]}
    todo = [t for t in g.tasks if t.variant not in done.get(t.route, {})]
    failures: list[dict] = []
    for t in g.tasks:
        r = t.resources
        if r.get("spill_bytes"):
            failures.append(_failure(g, t, "spill", {"spill_bytes": r["spill_bytes"], "registers": r["registers"]},
                                     f"ptxas: {r['spill_bytes']} B of spills", gpu, command))
    total = len(g.tasks)
    n_done = total - len(todo)
    run_all, close, how = _executor(len(todo), workers, log)
    log(f"kda2 tune: {g.spec} / {g.arch} on {gpu} (profile {g.profile.name}): {total} candidates, {len(todo)} to "
        f"measure ({how})")
    start = time.monotonic()
    measured = 0
    stopped = False

    def save_partial() -> None:
        write_text(part_path, json.dumps({"schema": RECORD_SCHEMA, "spec": g.spec, "profile": g.profile.name,
                                          "library_sha256": g.library_sha256, "done": done}, indent=1,
                                         sort_keys=True) + "\n")

    try:
        for t, res in run_all(todo, quick, g.profile.l2_bytes):
            measured += 1
            n_done += 1
            entry = {"model_us": t.model["us"], **{k: v for k, v in res.items() if k not in ("failure", "fatal")}}
            if "failure" in res:
                entry.update(us=None, rejected=res["failure"])
                numbers = {k: res[k] for k in ("error", "shape") if k in res}
                failures.append(_failure(g, t, res["failure"], numbers, res["detail"], gpu, command))
            done.setdefault(t.route, {})[t.variant] = entry
            if res.get("fatal"):  # the kernel faults whatever the row: settle its other rows too
                for other in g.tasks:
                    if other.variant == t.variant and other.variant not in done.get(other.route, {}):
                        done.setdefault(other.route, {})[other.variant] = dict(entry, model_us=other.model["us"])
                        n_done += 1
            save_partial()
            el = time.monotonic() - start
            eta = el / measured * (total - n_done)
            kn = " ".join(f"{k}={v}" for k, v in knobs(t.config).items() if k != "state_layout")
            what = (f"REJECTED {res['failure']}: {res['detail']}" if "failure" in res else
                    f"{res['us']:9.1f} us (model {t.model['us']:.1f})  rel L2 {res['error']:.1e}")
            log(f"[{n_done:3d}/{total} {_fmt_s(el)} ETA {_fmt_s(eta)}] {t.route:<14} {t.variant} {kn}: {what}")
            if res.get("fatal"):
                log(f"kda2 tune: {t.variant} faulted on the GPU ({res['detail']}); this process's CUDA context is "
                    f"lost: recorded, kept {part_path}; re-run the same command to resume with the others")
                stopped = True
                break
            if deadline is not None and time.monotonic() > deadline and n_done < total:
                stopped = True
                break
    finally:
        close()
        append_failures(Path(tuning_dir) / "failures" / f"{g.spec}.{g.profile.name}.jsonl", failures)
    if stopped:
        if n_done < total:
            log(f"kda2 tune: stopped with {total - n_done} candidates left; kept {part_path}, re-run the same "
                "command to resume")
            return None
    # the record: per row the fastest correct candidate; slower-than-incumbent failures; model vs measured
    rows: dict[str, dict[str, Any]] = {}
    by_route: dict[str, list[Task]] = {}
    for t in g.tasks:
        by_route.setdefault(t.route, []).append(t)
    late: list[dict] = []
    unrouted: dict[str, Any] = {}
    for key, tasks in by_route.items():
        cands = done.get(key, {})
        ok = {vid: c for vid, c in cands.items() if c.get("us") is not None}
        if not ok:  # left out of the routes: the build keeps routing the row by rank; the failures say why
            unrouted[key] = {"candidates": cands}
            log(f"kda2 tune: error: {g.spec}/{g.arch} {key}: no candidate passed the reference check; the row stays "
                f"routed by rank (see {Path(tuning_dir) / 'failures'}; `kda2 rules propose` turns them into rules)")
            continue
        best = min(ok, key=lambda vid: ok[vid]["us"])
        inc = next((t for t in tasks if t.incumbent), None)
        if inc is not None and inc.variant in ok:
            base = ok[inc.variant]["us"]
            for t in tasks:
                c = ok.get(t.variant)
                if c is not None and c["us"] > base * (1 + margin):
                    late.append(_failure(g, t, "slower_than_incumbent",
                                         {"us": c["us"], "incumbent_us": base, "incumbent": inc.variant,
                                          "margin": margin},
                                         f"{c['us']:.1f} us vs the incumbent's {base:.1f} us (+{margin:.0%} allowed)",
                                         gpu, command))
        pairs = [(c["model_us"], c["us"]) for c in ok.values() if c.get("model_us") is not None]
        rho = spearman([p for p, _ in pairs], [m for _, m in pairs])
        # each batch class's own winner: its dispatch row routes there (kda2.plan.model.class_rows)
        classes = {}
        for w in workloads(g.family, tasks[0].bucket):
            timed = {vid: c["classes"][w.name] for vid, c in ok.items() if w.name in c.get("classes", {})}
            if timed:
                win = min(timed, key=timed.get)
                classes[w.name] = {"variant": win, "us": timed[win], "shape": w.as_dict()}
                sp = ok[win].get("splits", {}).get(w.name)
                if sp:  # the winner's split at the row's fewest chains: the fastest number of segments
                    best_seg = min(sp["us"], key=lambda n: (sp["us"][n], int(n)))
                    classes[w.name]["split"] = {**sp, "segments": int(best_seg)}
        rows[key] = {"variant": best, "shape": workloads(g.family, tasks[0].bucket)[0].as_dict(),
                     "spearman": None if rho is None else round(rho, 3), "candidates": cands, "classes": classes}
        log(f"  {key:<14} -> {best} {ok[best]['us']:.1f} us; model-vs-measured Spearman "
            f"{'n/a' if rho is None else f'{rho:+.2f}'} over {len(pairs)}")
        for name, c in classes.items():
            if name != rows[key]["shape"]["class"]:
                log(f"  {key:<14}    {name}: {c['variant']} {c['us']:.1f} us")
            if "split" in c:
                sp = c["split"]
                log(f"  {key:<14}    {name} split at N=1 T={sp['shape']['T']} H={sp['shape']['H']}: "
                    + ", ".join(f"{n} segment(s) {us:.1f} us" for n, us in sp["us"].items())
                    + f" -> split<={sp['segments']}")
    append_failures(Path(tuning_dir) / "failures" / f"{g.spec}.{g.profile.name}.jsonl", late)
    data = {"schema": RECORD_SCHEMA, "spec": g.spec, "profile": g.profile.name, "arch": g.arch, "gpu": gpu,
            "date": _now(), "torch": _torch_version(), "library_sha256": g.library_sha256, "command": command,
            "routes": rows, **({"unrouted": unrouted} if unrouted else {})}
    path = Path(record) if record else record_path(g.spec, g.profile.name, tuning_dir)
    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    part_path.unlink(missing_ok=True)
    data["ok"] = not unrouted
    log(f"kda2 tune: wrote {path}" + (f"; {len(failures) + len(late)} failure record(s) in "
                                      f"{Path(tuning_dir) / 'failures'}" if failures or late else ""))
    return data


def _resumable(done: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The `done` of a partial record, checked: ({route: {variant: entry}}, the "route/variant" entries without a
    time, left out so they are measured again). An entry is timed ("us" a number), rejected ("us" null and
    "rejected" naming the failure) or pruned ("us" null and "pruned" the reason). Raises ValueError naming the first
    malformed field (the caller then starts afresh, as for a truncated file)."""
    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    def r(x: Any) -> str:  # a value, as the message quotes it
        t = json.dumps(x)
        return t if len(t) <= 40 else t[:37] + "..."

    def times(x: Any, where: str) -> None:  # {name: us}
        if not isinstance(x, dict) or not all(number(v) for v in x.values()):
            raise ValueError(f"{where} is {r(x)}, not an object of times in us")

    if not isinstance(done, dict):
        raise ValueError(f"'done' is {r(done)}, not an object of routes")
    out: dict[str, dict[str, Any]] = {}
    again: list[str] = []
    for route, cands in done.items():
        if not isinstance(cands, dict):
            raise ValueError(f"done.{route} is {r(cands)}, not an object of candidates")
        for vid, e in cands.items():
            where = f"done.{route}.{vid}"
            if not isinstance(e, dict):
                raise ValueError(f"{where} is {r(e)}, not an object")
            us = e.get("us")
            if us is not None and not (number(us) and us >= 0):
                raise ValueError(f"{where}.us is {r(us)}, not a time in us (or null for a rejected candidate)")
            if e.get("model_us") is not None and not number(e["model_us"]):
                raise ValueError(f"{where}.model_us is {r(e['model_us'])}, not a number")
            if "classes" in e:
                times(e["classes"], f"{where}.classes")
            splits = e.get("splits", {})
            if not isinstance(splits, dict):
                raise ValueError(f"{where}.splits is {r(splits)}, not an object")
            for name, sp in splits.items():
                times(sp.get("us") if isinstance(sp, dict) else sp, f"{where}.splits.{name}.us")
                if not all(str(n).isdigit() for n in sp["us"]):
                    raise ValueError(f"{where}.splits.{name}.us has keys {list(sp['us'])}, not segment counts")
            settled = us is None and any(isinstance(e.get(k), str) for k in ("rejected", "pruned"))
            if us is None and not settled:  # no time and no reason: measured again, not counted as rejected
                again.append(f"{route}/{vid}")
                continue
            out.setdefault(route, {})[vid] = e
    return out, again


def check_writable(path: str | os.PathLike, what: str) -> None:
    """Refuse, in one line, a file that write_text could not write: its directory must exist or be creatable (the
    nearest existing ancestor is a directory where a file can be created), and the path no directory."""
    from kda2.artifact.atomic import probe_dir

    path = Path(path)
    if path.is_dir():
        raise TuneError(f"{what} {path}: is a directory; name a .json file")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise TuneError(f"{what} {path}: cannot be written: {parent} is not a directory")
    try:
        probe_dir(parent)
    except OSError as e:
        raise TuneError(f"{what} {path}: cannot be written: creating a file in {parent} fails "
                        f"({e.strerror or e}); name a writable path") from None


def record_hint(record: str | os.PathLike | None, spec: str, profile: str, tuning_dir: str | os.PathLike) -> str | None:
    """When --record names another file than the one the build reads: where the build reads records from."""
    build_reads = record_path(spec, profile, tuning_dir)
    if record is None or Path(os.path.abspath(record)) == Path(os.path.abspath(build_reads)):
        return None
    return (f"kda2 tune: note: the build routes by {build_reads} only (tuning/<spec>.<profile>.json under "
            f"TUNING_DIR, default tuning/), not by {record}: copy it there before rebuilding, or the dispatch tables "
            "stay as they are")


def _up_to_date(g: Group, path: str | os.PathLike) -> bool:
    """A record of this very library (same sha256) covering every row: a resumed multi-library run skips it."""
    try:
        rec = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    rows = {t.route for t in g.tasks}
    have = set(rec.get("routes", {})) | set(rec.get("unrouted", {}))
    return bool(g.library_sha256) and rec.get("library_sha256") == g.library_sha256 and rows <= have


def gpu_available() -> str | None:
    """None when a CUDA GPU is usable by torch here, else why not (one line)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed (kda2 tune times kernels with torch CUDA events)"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible (torch.cuda.is_available() is false); run kda2 tune on the GPU host"
    return None


def main(targets: list[str], *, dry_run: bool = False, quick: bool = False, specs_dir: str = "kernel_specs",
         rules_dir: str = "rules", profiles_dir: str | None = None, profile: str | None = None,
         tuning_dir: str = "tuning", record: str | None = None, margin: float = DEFAULT_MARGIN,
         time_limit: float | None = None, workers: int | None = None, force: bool = False, log=print) -> int:
    """`kda2 tune`: each target a build/_candidates/<spec>/<arch> directory, a manifest, or (dry run only) a spec
    YAML."""
    groups: list[Group] = []
    for tgt in targets:
        if str(tgt).endswith((".yaml", ".yml")):
            if not dry_run:
                raise TuneError(f"{tgt}: a spec can only be listed (--dry-run); tune the build of every candidate, "
                                f"{DEFAULT_BUILD_DIRS['all']}/<spec>/<arch> (`kda2 build --candidates all <spec>`)")
            groups += groups_from_spec(tgt, rules_dir=rules_dir, profiles_dir=profiles_dir, profile=profile,
                                       tuning_dir=tuning_dir)
        else:
            groups.append(groups_from_manifest(tgt, specs_dir=specs_dir, profiles_dir=profiles_dir,
                                               profile=profile, tuning_dir=tuning_dir))
    if record and len(groups) > 1:
        raise TuneError("--record names one file: tune one library at a time with it")
    if time_limit is not None and not _seconds_ok(time_limit):
        raise TuneError(f"--time-limit {time_limit}: allowed: a number of seconds > 0 (leave it out for no limit)")
    if not margin >= 0:
        raise TuneError(f"--margin {margin}: allowed: a fraction >= 0")
    if workers is not None and workers < 1:
        raise TuneError(f"--workers {workers}: allowed: a whole number of GPUs >= 1 (None: every visible GPU)")
    if dry_run:
        for g in groups:
            describe(g, log)
        return 0
    for g in groups:  # before any timing: what the run writes at its end, or after the first candidate
        check_writable(record or record_path(g.spec, g.profile.name, tuning_dir), "--record" if record else "record")
        check_writable(partial_path(g.spec, g.profile.name, tuning_dir), "partial record")
    why = gpu_available()
    if why:
        raise TuneError(why)
    deadline = time.monotonic() + time_limit if time_limit is not None else None
    command = "kda2 tune " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "kda2 tune " + " ".join(targets)
    rc = 0
    for g in groups:
        if not force and _up_to_date(g, record or record_path(g.spec, g.profile.name, tuning_dir)):
            log(f"kda2 tune: {g.spec}/{g.arch}: the record already holds this library's measurements (--force to "
                "re-tune)")
            continue
        part = partial_path(g.spec, g.profile.name, tuning_dir)
        try:
            out = tune_group(g, quick=quick, tuning_dir=tuning_dir, record=record, margin=margin, deadline=deadline,
                             workers=workers, command=command, explicit_profile=bool(profile), log=log)
        except KeyboardInterrupt:
            kept = f"what was measured is kept in {part}" if part.is_file() else f"nothing was measured yet ({part})"
            raise TuneInterrupted(f"interrupted; {kept}, re-run to resume") from None
        if out is None:
            rc = 3
            break
        if not out.pop("ok", True):
            rc = 1
        hint = record_hint(record, g.spec, g.profile.name, tuning_dir)
        if hint:
            log(hint)
    return rc
