"""`kda2` command line: build, plan, inspect, rules, tune, calibrate, vendor, verify, bench.

Errors the user can fix (bad spec, bad rule, missing tool, corrupt artifact) print one line
`kda2: error: ...` and exit 2; nothing here prints a traceback for them.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from kda2.artifact.manifest import CANDIDATE_SETS, DEFAULT_BUILD_DIRS, default_build_dir
from kda2.tools.cache import AGE_UNITS as CACHE_AGE_UNITS, GRACE_S as CACHE_GRACE_S, SIZE_UNITS as CACHE_SIZE_UNITS

def _fail(msg: str) -> int:
    print(f"kda2: error: {msg}", file=sys.stderr)
    return 2


# ---- build -----------------------------------------------------------------------------------

#: a node's progress line from the graph's actions (compile/graph.py _progress): `kda2 <kind> <target>`
_NODE_LINE = re.compile(r"kda2 (\S+(?: -dc)?)\s+(.*)")


def _scons_arg(scons_args: Sequence[str], key: str, default: str) -> str:
    return next((x.split("=", 1)[1] for x in reversed(scons_args) if x.startswith(f"{key}=")), default)


def _build_dir(args: argparse.Namespace) -> str:
    """The build tree scons writes: BUILD_DIR= among the scons arguments, else the candidate set's own."""
    return _scons_arg(args.scons_args, "BUILD_DIR", default_build_dir(args.candidates))


def _is_spec_path(word: str) -> bool:
    return word.endswith((".yaml", ".yml")) or os.sep in word or "/" in word


def _stage_spec_files(args: argparse.Namespace, top: Path) -> tuple[list[str], dict[str, str]] | int:
    """`kda2 build PATH.yaml ...`: the SCons arguments (SPECS=, and SPECS_DIR= for files outside the checkout's specs
    directory) and {staged path: the user's path} to name the user's file in scons' messages; or an exit status.

    SCons plans every spec of one SPECS_DIR and digests every file there, so a spec file outside it (say /tmp/my.yaml,
    beside unrelated files) is copied, alone with the other files given, into <BUILD_DIR>/.kda2/spec-files/ and built
    from there; SPECS matches the spec's `name:` field, not its file name."""
    paths = [w for w in args.specs if _is_spec_path(w)]
    if not paths:
        return ([f"SPECS={','.join(args.specs)}"] if args.specs else []), {}
    from kda2.spec.model import SpecError, load_spec   # main() answers a missing [build] extra

    specs_dir = (top / _scons_arg(args.scons_args, "SPECS_DIR", "kernel_specs")).resolve()
    build_dir = top / _build_dir(args)
    names, outside = [w for w in args.specs if not _is_spec_path(w)], {}
    for word in paths:
        path = Path(word).expanduser()
        if not path.is_file():
            return _fail(f"{word}: no such spec file" + ("" if path.suffix == ".yaml" else " (a spec name has no "
                                                          "'/' or .yaml; a spec file ends in .yaml)"))
        try:
            spec = load_spec(path)
        except SpecError as e:
            return _fail(str(e))
        if path.stem != spec.name:
            print(f"kda2 build: {word} is spec {spec.name!r} (its name: field, not its file name): it builds to "
                  f"{_build_dir(args)}/{spec.name}/<arch>; `kda2 vendor/inspect/tune` "
                  f"know it as {spec.name}", flush=True)
        if path.resolve().parent == specs_dir:
            names.append(spec.name)  # scons reads that directory anyway
        elif spec.name in outside:
            return _fail(f"{word}: name: {spec.name!r} again (also {outside[spec.name]}); one build takes one file "
                         f"per spec name")
        else:
            outside[spec.name] = path
    if not outside:
        return [f"SPECS={','.join(dict.fromkeys(names))}"], {}
    if names:
        return _fail(f"{', '.join(map(str, outside.values()))}: outside {specs_dir}; build spec files from "
                     f"elsewhere on their own (scons reads one specs directory), then {', '.join(names)}")
    stage = (build_dir / ".kda2" / "spec-files").resolve()
    stage.mkdir(parents=True, exist_ok=True)
    staged: dict[str, str] = {}
    keep = {f"{name}.yaml" for name in outside}
    for old in stage.iterdir():  # files staged by an earlier build of other spec files
        if old.name not in keep and old.is_file():
            old.unlink()
    for name, path in outside.items():
        dest, data = stage / f"{name}.yaml", path.read_bytes()
        if not dest.is_file() or dest.read_bytes() != data:
            dest.write_bytes(data)
        staged[str(dest)] = str(path)
    return [f"SPECS_DIR={stage}", f"SPECS={','.join(outside)}"], staged


def _jobs(text: str) -> int:
    """-j's type: scons' parallel jobs, a whole number >= 1 (0 and negative counts went to scons unchecked)."""
    from kda2.tools import count_arg

    return count_arg(text, "a whole number of jobs >= 1")


def cmd_build(args: argparse.Namespace) -> int:
    top = Path(args.directory).resolve()
    if not (top / "SConstruct").is_file():
        return _fail(f"{top}: no SConstruct here; run from a kda2 checkout or pass -C DIR")
    if args.build_dir is not None:   # --build-dir is scons' BUILD_DIR=, as vendor's and rules' --build-dir name it
        given = [x for x in args.scons_args if x.startswith("BUILD_DIR=")]
        if given:
            return _fail(f"--build-dir {args.build_dir} and {given[-1]} after --: give one of them")
        if not args.build_dir:
            return _fail("--build-dir '': allowed: a directory (leave it out for the candidate set's own)")
        args.scons_args = [f"BUILD_DIR={args.build_dir}", *args.scons_args]
    staging = _stage_spec_files(args, top)
    if isinstance(staging, int):
        return staging
    spec_args, staged = staging
    argv = [sys.executable, "-m", "SCons", "-C", str(top), f"-j{args.jobs}", *spec_args]
    if args.verbose:
        argv.append("VERBOSE=1")
    argv.append(f"CANDIDATES={args.candidates}")
    argv += args.scons_args
    start = time.monotonic()
    asking = bool({"-q", "--question"} & set(args.scons_args))
    counts: dict[str, int] = {}
    seen: list[str] = []  # kept for the failure records of a failed build
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert proc.stdout is not None
    # A SIGTERM to kda2 goes on to scons (left running, it finished the tree unattended and raced the next build on
    # .sconsign); Ctrl-C reaches scons from the terminal itself. Either way scons stops at a node boundary, what it
    # finished is kept and cached, and its failures are not recorded: an interrupted node failed for no kernel reason.
    stopped: list[str] = []

    def _forward(signum, _frame) -> None:
        stopped.append(signal.Signals(signum).name)
        proc.send_signal(signum)

    try:
        previous = signal.signal(signal.SIGTERM, _forward)
    except ValueError:  # not the main thread (kda2's main() called from another): the default action stays
        previous = None
    try:
        rc = _follow(proc, staged, seen, counts, start, asking)
    except KeyboardInterrupt:
        stopped.append("SIGINT")
        proc.send_signal(signal.SIGINT)  # already sent where the terminal sent it; a second one is harmless
        rc = proc.wait()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if stopped:
        print(f"kda2 build: interrupted ({stopped[0]}) after {time.monotonic() - start:.1f}s; what finished is kept "
              "and cached: run the same command again to go on", file=sys.stderr)
        return 130 if stopped[0] == "SIGINT" else 128 + signal.SIGTERM
    if asking:   # scons -q builds nothing: its status is the answer
        print(f"kda2 build: {'up to date' if rc == 0 else 'out of date' if rc == 1 else f'FAILED (rc {rc})'} "
              f"(scons -q, {time.monotonic() - start:.1f}s)")
        return rc
    return _after_build(args, top, spec_args, seen, counts, start, rc)


def _follow(proc: subprocess.Popen, staged: dict[str, str], seen: list[str], counts: dict[str, int], start: float,
            asking: bool) -> int:
    """scons' output as kda2 build's progress lines (one per node), until scons exits; returns its status."""
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        for dest, src in staged.items():  # name the user's spec file, not its staged copy
            line = line.replace(dest, src)
        seen.append(line)
        m = _NODE_LINE.match(line)
        if m:
            counts[m[1]] = counts.get(m[1], 0) + 1
            n = sum(counts.values())
            print(f"[{n:4d} {time.monotonic() - start:7.1f}s] {m[1]:<9} {m[2]}", flush=True)
        elif line.startswith("Retrieved"):
            counts["cached"] = counts.get("cached", 0) + 1
            print(f"[cache {time.monotonic() - start:7.1f}s] {line}", flush=True)
        elif (not line.startswith("scons: ") or "error" in line.lower() or "***" in line) and not (
                asking and line == "scons: building terminated because of errors."):
            print(line, flush=True)
    return proc.wait()


def _after_build(args: argparse.Namespace, top: Path, spec_args: list[str], seen: list[str], counts: dict[str, int],
                 start: float, rc: int) -> int:
    """A finished build's failure records and summary line."""
    if rc:
        from kda2.tools import feedback
        from kda2.tools.feedback import record_build_failures

        # the plan cache the failed kernels' knobs come from is under the build dir the scons arguments name
        for f in record_build_failures(seen, top=top, build_dir=_build_dir(args),
                                       command="kda2 build " + " ".join(sys.argv[2:])):
            then = (feedback.budget_advice(f) if f["kind"] in feedback.SPEC_SCOPED
                    else f"`kda2 rules propose {f['id']}` makes it a rule")
            print(f"kda2 build: failure {f['id']} ({f['kind']}, {f['spec']}/{f['arch']} {f['variant']}) on file in "
                  f"tuning/failures/{f['spec']}.{f['profile']}.jsonl; {then}")
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or ("nothing to do" if rc == 0 else
                                                                          "nothing built")
    print(f"kda2 build: {'ok' if rc == 0 else 'FAILED'} in {time.monotonic() - start:.1f}s ({summary})")
    if rc == 0 and args.candidates == "all":
        where = _build_dir(args)
        trees = sorted(str(p.parent.relative_to(top)) if p.is_relative_to(top) else str(p.parent)
                       for p in (top / where).glob("*/*/manifest.json")
                       if not spec_args or p.parent.parent.name in spec_args[-1].split("=", 1)[1].split(","))
        print(f"kda2 build: every candidate, for `kda2 tune` on a GPU host: {' '.join(trees) or where}; what ships "
              f"(`kda2 vendor`) stays the routed build")
    return rc


# ---- plan ------------------------------------------------------------------------------------

def _chunk_smem(c: dict) -> str:
    """prep/state shared-memory bytes of a chunk config, at the strides the TIR pass picks for it."""
    from kda2.plan.smem import expected_strides, prep_smem_bytes, state_smem_bytes
    from kda2.spec.knobs import knob

    s = expected_strides(c["k"])
    state = state_smem_bytes(s, k=c["k"], block_v=c["block_v"], stages=c["stages"], mma=knob(c, "state_mma"))
    return f"{prep_smem_bytes(s)}/{state}"


def _chunk_warps(c: dict) -> int:
    from kda2.plan.smem import state_warps
    from kda2.spec.knobs import knob

    return state_warps(c["block_v"], knob(c, "state_mma"))


def _knob_cell(name: str):
    """The cell of a knob a config may leave out (its absent default shown)."""
    def cell(c: dict) -> str:
        from kda2.spec.knobs import knob

        return knob(c, name)
    return cell


#: Per family: (title, format width, cell) of the knob columns of `kda2 plan`.
_PLAN_COLUMNS = {
    "recurrent": [("prefetch", "<8", lambda c: c["prefetch"]),
                  ("v/warp", ">6", lambda c: f"{c['v_per_warp']}" + (f"x{c['lane_cols']}" if c.get("lane_cols", 1) > 1
                                                                   else "")),
                  ("warps", ">5", lambda c: c["warps"]), ("cta/sm", ">6", lambda c: c.get("min_ctas", "-")),
                  ("preload", ">7", lambda c: c.get("preload", "-")),
                  ("staging", "<7", lambda c: c["staging"]), ("k_map", "<8", lambda c: c["k_map"]),
                  ("reduce", "<9", lambda c: c["reduce"]),
                  ("sched", "<5", lambda c: "pers" if c.get("persistent") else "grid"),
                  ("states", "<6", lambda c: "+tok" if c.get("intermediate") else "final")],
    "chunk": [("chunk", ">5", lambda c: c["chunk"]), ("block_v", ">7", lambda c: c["block_v"]),
              ("stages", ">6", lambda c: c["stages"]), ("warps", ">5", _chunk_warps),
              ("mma", "<8", _knob_cell("state_mma")), ("prep", "<6", _knob_cell("prep_wu")),
              ("fused", "<5", lambda c: "yes" if c.get("fused") else "no"),
              ("smem prep/state B", "<17", _chunk_smem)],
}


def _beside_spec(given: str | None, default: str, spec_path: str) -> tuple[Path, bool]:
    """A directory option of a command that takes a spec file: as given, else `default` in the current directory,
    else `default` in the checkout holding the spec file (its specs directory's parent), so a spec planned from
    elsewhere still meets its own rules and tuning records. (path, whether it exists)."""
    if given is not None:
        return Path(given), Path(given).is_dir()
    here = Path(default)
    if here.is_dir():
        return here, True
    beside = Path(spec_path).resolve().parent.parent / default
    return (beside, True) if beside.is_dir() else (here, False)


def _spec_file(word: str, specs_dir: str = "kernel_specs") -> str | None:
    """plan's SPEC: a spec file as given; a spec name (no '/' nor .yaml) is looked up as `kda2 build NAME` takes it,
    by the name: field of the specs in kernel_specs/ here (its file <name>.yaml first). None: no such spec there."""
    if _is_spec_path(word) or Path(word).is_file():
        return word
    import yaml

    root = Path(specs_dir)
    files = [root / f"{word}.yaml"] + sorted(root.glob("*.yaml")) if root.is_dir() else []
    for f in files:
        try:
            if f.is_file() and yaml.safe_load(f.read_text()).get("name") == word:
                return str(f)
        except (OSError, yaml.YAMLError, AttributeError):
            continue   # another spec's problem: not this one
    return None


def cmd_plan(args: argparse.Namespace) -> int:
    from kda2.plan.planner import PlanError, plan_spec
    from kda2.spec.rules import RuleError, load_rules
    from kda2.spec.model import SpecError, load_spec
    from kda2.plan.lock import class_times, read_spec_baselines, routes, tuned_splits
    from kda2.plan.profile import load_profiles, resolve_targets

    found = _spec_file(args.spec)
    if found is None:
        return _fail(f"{args.spec}: no such file, nor a spec of that name in kernel_specs/ here; plan takes a spec "
                     "file (PATH.yaml) or, from a checkout, a spec name (its name: field)")
    args.spec = found
    if args.rules is not None and not Path(args.rules).is_dir():
        return _fail(f"--rules {args.rules}: no such directory (rule files NNNN-slug.yaml, a checkout's rules/)")
    if args.profiles is not None and not Path(args.profiles).is_dir():
        return _fail(f"--profiles {args.profiles}: no such directory (hardware profiles, <name>.yaml)")
    rules_dir, has_rules = _beside_spec(args.rules, "rules", args.spec)
    if not has_rules:
        return _fail(f"{rules_dir}: no such rules directory (here, nor beside the spec file's specs directory); "
                     "pass --rules DIR (a kda2 checkout's rules/)")
    tuning_dir, tuned = _beside_spec(args.tuning, "tuning", args.spec)
    if args.tuning is not None and not tuned:
        return _fail(f"--tuning {args.tuning}: no such directory (tuning records, tuning/<spec>.<profile>.json)")
    try:
        spec = load_spec(args.spec)
        rules = load_rules(rules_dir, args.profiles)
        archs = [args.arch] if args.arch else list(spec.archs)
        if args.arch and args.arch not in spec.archs:
            return _fail(f"{args.spec}: arch {args.arch} is not in archs ({', '.join(spec.archs)})")
        targets = resolve_targets(spec, load_profiles(args.profiles))
        if args.profile:  # plan for another GPU of the same arch (what-if), without its record
            profiles = load_profiles(args.profiles)
            prof = profiles.get(args.profile)
            if prof is None:
                return _fail(f"--profile {args.profile}: unknown; allowed: {', '.join(sorted(profiles))}")
            # the profile picks the arch: one the spec does not build, or another than --arch, was planned unsaid
            allowed_archs = [args.arch] if args.arch else list(spec.archs)
            if prof.arch not in allowed_archs:
                fits = sorted(n for n, q in profiles.items() if q.arch in allowed_archs)
                return _fail(f"--profile {args.profile} is for {prof.arch}, "
                             + (f"not --arch {args.arch}" if args.arch else
                                f"which is not in {args.spec}'s archs ({', '.join(spec.archs)})")
                             + f"; allowed: the profiles for {', '.join(allowed_archs)}: {', '.join(fits) or 'none'}")
            targets, archs = {prof.arch: prof}, [prof.arch]
        baselines = read_spec_baselines(spec.name, targets, tuning_dir)  # what the build routes by
        lock, splits, times = routes(baselines), tuned_splits(baselines), class_times(baselines)
        plans = [plan_spec(spec, a, rules, lock.get(a), profile=targets[a], tuned_splits=splits.get(a),
                           tuned_times=times.get(a)) for a in archs]
        for p in plans:
            for w in p.warnings:
                print(f"kda2: warning: {w}", file=sys.stderr)
    except (SpecError, RuleError, PlanError, ValueError) as e:
        return _fail(str(e))
    if args.json:
        print(json.dumps([{"arch": p.arch, "profile": p.profile.name, "dispatch": list(p.dispatch),
                           "variants": [{"id": v.id, "name": v.name, "config": v.config, "reasons": v.reasons,
                                         "rules": v.rules, "flags": v.flags} for v in p.variants]}
                          for p in plans], indent=1))
        return 0
    columns = _PLAN_COLUMNS[spec.family]
    for p in plans:
        routed: dict[str, list[str]] = {}
        for d in p.dispatch:
            split = f",split<={d['split']}:{d['split_by']}" if spec.family == "chunk" else ""
            where = f"{'kf' if d['state_layout'] == 'k_first' else 'vf'}<={d['bucket']}/{d['class']}"
            routed.setdefault(d["variant"], []).append(f"{where}({d['routed_by']}{split})")
            if d.get("fallback"):   # a twin's row: the calls its fused kernel declines run here
                routed.setdefault(d["fallback"], []).append(f"{where}(fallback)")
        print(f"{spec.name} / {p.arch}: {len(p.variants)} candidate kernels, {len(routed)} routed, for "
              f"{len(p.dispatch)} dispatch rows "
              f"(buckets {list(spec.seq_len_buckets)}, layouts {list(spec.features.state_layouts)}); "
              f"{p.profile.cite('gpu', 'sm_count', 'smem_per_block_bytes')}; rules directory {rules_dir}; tuning record "
              + (f"{tuning_dir}/{spec.name}.{p.profile.name}.json" if p.arch in baselines else
                 f"none in {tuning_dir if tuned else f'{tuning_dir} (no such directory)'}: routes by the model's rank"))
        print(f"  {'id':<12} {'layout':<8} "
              + " ".join(f"{title:{width}}" for title, width, _ in columns) + " routes (layout<=bucket/batch class, routed by"
              + (",split<=segments:chosen by" if spec.family == "chunk" else "") + ")  rules")
        for v in p.variants:
            c = v.config
            print(f"  {v.id:<12} {c['state_layout']:<8} "
                  + " ".join(f"{cell(c)!s:{width}}" for _, width, cell in columns)
                  + f" {' '.join(routed.get(v.id, ['candidate']))}" + (f"  rules {' '.join(v.rules)}" if v.rules else ""))
            if args.reasons:
                for agent, why in v.reasons:
                    print(f"      [{agent}] {why}")
        if args.reasons and spec.family == "chunk":
            print("  the exact split per dispatch row (the most segments the library's choice takes):")
            for d in p.dispatch:
                print(f"    {d['state_layout']}<={d['bucket']}/{d['class']} (>= {d['min_chains']} chains): "
                      f"split<={d['split']} [{d['split_by']}] {d['split_why']}")
        print()
    return 0


# ---- inspect ---------------------------------------------------------------------------------

def cmd_inspect(args: argparse.Namespace) -> int:
    from kda2.tools.inspect import inspect_manifest

    return inspect_manifest(args.artifact, variant=args.variant, reasons=args.reasons)


# ---- rules -----------------------------------------------------------------------------------

def cmd_rules(args: argparse.Namespace) -> int:
    from kda2.plan.planner import PlanError
    from kda2.plan.profile import ProfileError
    from kda2.spec.model import SpecError
    from kda2.spec.rules import RuleError, load_rules, write_lock
    from kda2.tools import feedback

    needs_target = args.action in ("propose", "impact")
    if needs_target != bool(args.target):
        return _fail(f"kda2 rules {args.action}: " + ("needs a failure record (FILE, FILE:ID or ID)"
                     if args.action == "propose" else "needs a rule file" if args.action == "impact"
                     else "takes no argument"))
    # propose's own options: refused elsewhere rather than silently doing nothing
    given = [opt for opt, on in (("--action", args.rule_action != "forbid"), ("--flag", bool(args.flag)),
                                 ("--scope", args.scope is not None)) if on]
    if given and args.action != "propose":
        return _fail(f"kda2 rules {args.action}: {', '.join(given)} only shape `kda2 rules propose`")
    if args.flag and args.rule_action != "flags":
        return _fail("kda2 rules propose: --flag needs --action flags (a forbid rule passes no options)")
    # what the action reads, checked here to name the option (the loaders say only `DIR: no such directory`)
    dirs = [("--rules", args.rules, "rule files NNNN-slug.yaml")]
    if args.action in ("check", "impact"):
        dirs.append(("--specs", args.specs, "spec YAMLs"))
        if args.profiles is not None:
            dirs.append(("--profiles", args.profiles, "hardware profiles, <name>.yaml"))
    for opt, value, what in dirs:
        if not Path(value).is_dir():
            return _fail(f"{opt} {value}: no such directory ({what})")
    if args.action == "impact" and not Path(args.target).is_file():
        return _fail(f"{args.target}: no such rule file (impact takes a rule file, e.g. "
                     f"{Path(args.rules) / 'NNNN-slug.yaml'})")
    try:
        if args.action == "lock":
            print(f"kda2 rules: wrote {write_lock(args.rules)}")
            return 0
        if args.action == "propose":
            path = feedback.propose(args.target, rules_dir=args.rules, tuning_dir=args.tuning, action=args.rule_action,
                                    flags=args.flag, scope=args.scope, profiles_dir=args.profiles)
            print(f"kda2 rules: wrote {path} and locked it; review its match, then `kda2 rules impact {path}`")
            return 0
        if args.action == "impact":
            rows = feedback.impact(args.target, rules_dir=args.rules, specs_dir=args.specs,
                                   profiles_dir=args.profiles, build_dir=args.build_dir)
            broken = sorted(k for k, r in rows.items() if "plan_fails" in r)
            if broken:
                return _fail(f"with {args.target} the plan of {', '.join(broken)} fails (above): narrow its match "
                             "or its action before `kda2 rules lock`")
            return 0
        rules = load_rules(args.rules, args.profiles)
        problems = feedback.check(args.rules, args.specs, args.profiles)
    except (RuleError, SpecError, ProfileError, PlanError, OSError) as e:
        return _fail(str(e))
    if problems:
        for p in problems:
            print(f"kda2: error: {p}", file=sys.stderr)
        return 1
    print(f"kda2 rules: {len(rules)} rules, schema ok, lock up to date, each matches a planned variant")
    return 0


# ---- tune, calibrate -------------------------------------------------------------------------

def cmd_tune(args: argparse.Namespace) -> int:
    # only runtime-side imports here: on a GPU host without pydantic/PyYAML tune reads the build's plan cache
    from kda2.runtime.errors import ArtifactError
    from kda2.tools.tune import TuneError, main

    if args.dry_run:  # a spec name, as plan takes it: its file in --specs (a dry run plans a spec without a build)
        args.targets = [(_spec_file(t, args.specs) or t) if not (_is_spec_path(t) or Path(t).exists()) else t
                        for t in args.targets]
    # named by their option (the loaders say only `DIR: no such directory`); rules are read by a spec's dry run only
    if args.profiles is not None and not Path(args.profiles).is_dir():
        return _fail(f"--profiles {args.profiles}: no such directory (hardware profiles, <name>.yaml)")
    if args.dry_run and any(str(t).endswith((".yaml", ".yml")) for t in args.targets) \
            and not Path(args.rules).is_dir():
        return _fail(f"--rules {args.rules}: no such directory (a spec's dry run plans with its rules, "
                     "NNNN-slug.yaml)")
    try:
        rc = main(args.targets, dry_run=args.dry_run, quick=args.quick, specs_dir=args.specs, rules_dir=args.rules,
                  profiles_dir=args.profiles, profile=args.profile, tuning_dir=args.tuning, record=args.record,
                  margin=args.margin, time_limit=args.time_limit, workers=args.workers, force=args.force)
    except (ArtifactError, TuneError, ValueError) as e:  # ProfileError is a ValueError
        return _fail(str(e))
    except Exception as e:  # spec and rule errors, named so that their modules (pydantic) need not be importable
        if type(e).__name__ in ("SpecError", "RuleError"):
            return _fail(str(e))
        raise
    except KeyboardInterrupt:   # tune.main turns its own into a TuneError naming the partial record
        return _fail(f"interrupted; what was measured is kept in {args.tuning}/<spec>.<profile>.partial.json, "
                     "re-run to resume")
    if rc == 0 and not args.dry_run and args.record is None:   # tune.record_hint speaks for another --record
        print("kda2 tune: rebuild (scons) to route the dispatch tables to the winners")
    return rc


def _seconds(text: str) -> float:
    """--time-limit's type (kda2.tools.tune time_limit_arg, imported when the option is given)."""
    from kda2.tools.tune import time_limit_arg

    return time_limit_arg(text)


def _margin(text: str) -> float:
    """--margin's type (kda2.tools.tune margin_arg)."""
    from kda2.tools.tune import margin_arg

    return margin_arg(text)


def _workers(text: str) -> int:
    """--workers' type (kda2.tools.tune workers_arg)."""
    from kda2.tools.tune import workers_arg

    return workers_arg(text)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from kda2.tools.calibrate import CalibrateError, calibrate

    try:
        path = calibrate(args.out, name=args.name, quick=args.quick)
    except CalibrateError as e:
        return _fail(str(e))
    print(f"kda2 calibrate: wrote {path}")
    return 0


# ---- vendor, verify -------------------------------------------------------------------------

def cmd_vendor(args: argparse.Namespace) -> int:
    from kda2.artifact.bundle import BundleError
    from kda2.tools.vendor import summary, vendor

    try:
        index = vendor(args.spec, args.to, archs=args.arch, build_dir=args.build_dir, rules_dir=args.rules)
    except (BundleError, OSError) as e:
        return _fail(str(e))
    print(summary(args.to, index))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from kda2.artifact.bundle import BundleError
    from kda2.tools.vendor import verify_bundle

    path = Path(args.bundle)
    if not path.exists():
        return _fail(f"{args.bundle}: no such directory (the bundle directory `kda2 vendor SPEC --to DIR` made)")
    if path.is_file():
        if path.name != "bundle.json":
            return _fail(f"{args.bundle}: a file, not a bundle directory (give the directory holding bundle.json)")
        path = path.parent
    try:
        print(verify_bundle(path))
    except (BundleError, OSError) as e:
        return _fail(str(e))
    return 0


# ---- cache -----------------------------------------------------------------------------------

def cmd_cache(args: argparse.Namespace) -> int:
    from kda2.tools import cache

    root = Path(args.dir) if args.dir else cache.default_dir(args.directory)
    try:
        if args.action == "info":
            given = [o for o, v in (("--max-size", args.max_size), ("--older-than", args.older_than),
                                    ("--dry-run", args.dry_run)) if v]
            if given:
                return _fail(f"{', '.join(given)}: options of `kda2 cache prune`, not of info")
            print(cache.info(root))
            return 0
        max_bytes = None if args.max_size is None else cache.parse_size(args.max_size)
        older = None if args.older_than is None else cache.parse_age(args.older_than)
        gone, stray, left = cache.prune(root, max_bytes, older, dry_run=args.dry_run)
    except (cache.CacheToolError, OSError) as e:
        return _fail(str(e))
    print(cache.prune_report(root, gone, stray, left, args.dry_run, max_bytes))
    return 0


# ---- bench -----------------------------------------------------------------------------------

def cmd_bench(args: argparse.Namespace) -> int:
    from kda2.bench import main as bench_main

    return bench_main(args.bench_args)


def version() -> str:
    """The installed kda2's version (package metadata), else the source tree's pyproject.toml, else
    kda2.__version__; with where the imported package lies (a source tree on PYTHONPATH shadows an install)."""
    import importlib.metadata

    import kda2

    where = Path(kda2.__file__).resolve().parent
    try:
        v = importlib.metadata.version("kda2")
    except importlib.metadata.PackageNotFoundError:
        v = _pyproject_version(where.parents[1] / "pyproject.toml") or getattr(kda2, "__version__", "unknown")
    return f"kda2 {v} ({where})"


def _pyproject_version(path: Path) -> str | None:
    """[project] version of a pyproject.toml (a source tree <tree>/src/kda2 run without installing)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        import tomllib
    except ImportError:  # Python 3.10
        m = re.search(r'^\[project\]\s*$(.*?)^version\s*=\s*"([^"]+)"', text, re.M | re.S)
        return m[2] if m and "\n[" not in m[1] else None
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError:
        return None
    return project.get("version") if project.get("name") == "kda2" else None


class _VersionAction(argparse.Action):
    """--version, worked out only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version())
        parser.exit()


#: --profiles of plan, rules and tune (kda2.plan.profile default_profiles_dir)
PROFILES_HELP = ("hardware profiles directory (default: $KDA2_PROFILES_DIR, else the profiles/ of the checkout kda2 is "
                 "imported from)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kda2", description="KDA²: declarative build of Kimi Delta Attention "
                                "CUDA kernels (YAML spec -> scons -> tuned, cached artifacts).")
    p.add_argument("--version", action=_VersionAction,
                   help="print the kda2 version (and where the package is imported from) and exit")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build the specs (wraps scons; one progress line per node; needs the [build] extra)",
                       description="Run scons over kernel_specs/ with a progress line per built node "
                       "([count elapsed]). A spec file (PATH.yaml) builds "
                       "that spec, under the name in its name: field; files from outside kernel_specs/ are built on "
                       "their own (copied to BUILD_DIR/.kda2/spec-files/ for scons' SPECS_DIR). "
                       "Extra arguments after -- go to scons (e.g. -- -q to check up-to-dateness, -- BUILD_DIR=DIR).")
    b.add_argument("specs", nargs="*", metavar="SPEC", help="spec names (their name: field) or spec YAML files to "
                   "build (default: all in kernel_specs/)")
    b.add_argument("-j", "--jobs", type=_jobs, default=os.cpu_count() or 1,
                   help="parallel jobs, >= 1 (default: CPUs)")
    b.add_argument("-C", "--directory", default=".", help="checkout holding SConstruct (default: .)")
    b.add_argument("-v", "--verbose", action="store_true", help="print full nvcc/nvlink command lines")
    b.add_argument("--build-dir", metavar="DIR", help="build tree to write, relative to -C's checkout (scons' "
                   "BUILD_DIR=; default: per --candidates below)")
    b.add_argument("--candidates", choices=CANDIDATE_SETS, default="routed",
                   help=f"routed: the variants the dispatch routes to, what a deployment runs, into "
                   f"{DEFAULT_BUILD_DIRS['routed']}/ (default); all: every candidate the agents kept, which `kda2 tune` "
                   f"times, into {DEFAULT_BUILD_DIRS['all']}/ (--build-dir picks another tree)")
    # (the words after `--` go to scons: main() splits them off before parsing; `scons_args` holds them)
    b.set_defaults(scons_args=[])
    b.set_defaults(func=cmd_build)

    pl = sub.add_parser("plan", help="show the candidate variants of a spec and why (needs the [build] extra)",
                        description="Run the planner agents and rules over SPEC and print the candidate "
                        "table (one row per variant; --reasons adds each agent's and rule's reason).")
    pl.add_argument("spec", help="path to a spec YAML (e.g. kernel_specs/kimi_linear_recurrent.yaml), or the name of "
                    "a spec in kernel_specs/ here (its name: field, as `kda2 build NAME` takes it)")
    pl.add_argument("--arch", help="only this arch (default: every arch in the spec)")
    pl.add_argument("--rules", default=None, help="rules directory (default: rules/ here, else the one of the "
                    "checkout the spec file is in)")
    pl.add_argument("--reasons", action="store_true", help="print every decision's reason")
    pl.add_argument("--json", action="store_true", help="machine-readable output")
    pl.add_argument("--profiles", default=None, help=PROFILES_HELP)
    pl.add_argument("--profile", help="plan for this profile instead of the spec's target for its arch")
    pl.add_argument("--tuning", default=None, help="tuning records directory (default: tuning/ here, else the one "
                    "of the checkout the spec file is in; the plan's first line names the record it routes by)")
    pl.set_defaults(func=cmd_plan)

    i = sub.add_parser("inspect", help="resources and SASS check of built artifacts",
                       description="First every file the manifest lists against its sha256 (a missing or changed one "
                       "is a FAIL line naming it). Then for each variant, one line per kernel entry (recurrent: its "
                       "input and state dtypes; chunk: prep, state, fold per input dtype, and the combine): "
                       "registers, shared memory, spills (from "
                       "ptxas); and a SASS check that the expected instructions are present and no local "
                       "memory (LDL/STL) is used. Exit 1 when a check fails.")
    i.add_argument("artifact", help="build/<spec>/<arch> directory or its manifest.json")
    i.add_argument("--variant", help="only this variant id")
    i.add_argument("--reasons", action="store_true", help="print the agents' and rules' reasons (the .why.json sidecars)")
    i.set_defaults(func=cmd_inspect)

    r = sub.add_parser("rules", help="check, lock, propose rules from failures, show a rule's impact (needs the [build] extra)",
                       description="check: lint every rule (schema, lock digests and versions: a body edit needs a version bump; each matches some "
                       "planned variant, none empties a dispatch row). lock: record versions and digests after a "
                       "bump. propose FAILURE: write rules/NNNN-slug.yaml from a failure record of kda2 tune "
                       "(FILE, FILE:ID or ID in tuning/failures/) and lock it. impact RULE: per spec and arch, the "
                       "candidates it matches, kernels it removes/adds/re-flags, rows it re-routes, built kernels "
                       "it invalidates.")
    r.add_argument("action", choices=["check", "lock", "propose", "impact"],
                   help="what to do (above): check, lock, propose FAILURE or impact RULE; not --action, which is the "
                   "`action:` of the rule propose writes")
    r.add_argument("target", nargs="?", help="propose: failure FILE[:ID] or ID; impact: a rule file")
    r.add_argument("--rules", default="rules", help="rules directory (default: rules)")
    r.add_argument("--specs", default="kernel_specs", help="specs directory (default: kernel_specs)")
    r.add_argument("--profiles", default=None, help=PROFILES_HELP)
    r.add_argument("--tuning", default="tuning", help="tuning records directory (default: tuning)")
    r.add_argument("--build-dir", action="append", help="build tree whose manifests impact counts (repeatable; "
                   f"default: {' and '.join(DEFAULT_BUILD_DIRS.values())})")
    r.add_argument("--action", dest="rule_action", default="forbid", choices=["forbid", "flags"],
                   help="propose only: the `action:` field of the rule it writes, forbid (drop the matched "
                   "candidates) or flags (compile them with --flag); default forbid. Not the positional action")
    r.add_argument("--flag", action="append", help="propose --action flags: an nvcc option (repeatable; one that "
                   "starts with '-' as --flag=-O2)")
    r.add_argument("--scope", choices=["arch", "profile"],
                   help="propose: scope the match to the failure's arch or profile (default: profile for "
                   "slower_than_incumbent, arch otherwise)")
    r.set_defaults(func=cmd_rules)

    t = sub.add_parser("tune", help="check and time every candidate on this GPU; record the winners",
                       description="On a GPU host: per built library of every candidate (build/_candidates/<spec>/<arch>, "
                       "from `kda2 build --candidates all`), rank and prune the "
                       "candidates of each dispatch row with the static model (ptxas resources + the target's "
                       "hardware profile), check each survivor against the fp64 reference, time it (CUDA events, "
                       "median, rotating inputs) at each batch class of its bucket, and write the fastest correct "
                       "one per row to tuning/<spec>.<profile>.json (resumable through a .partial.json; failures "
                       "to tuning/failures/). The next build routes its dispatch table there. Several GPUs: one "
                       "Dask worker each when `distributed` is importable. --dry-run lists without a GPU (a spec "
                       "YAML may be given then).")
    t.add_argument("targets", nargs="+", help="build/_candidates/<spec>/<arch> directories or their manifest.json "
                   "(with --dry-run also spec YAMLs)")
    t.add_argument("--dry-run", action="store_true", help="list candidates, model estimates and prunes; no GPU")
    t.add_argument("--quick", action="store_true", help="fewer timing repetitions")
    t.add_argument("--profile", help="hardware profile to record under (default: the spec's target for the arch)")
    t.add_argument("--record", help="record file to write (default: tuning/<spec>.<profile>.json)")
    t.add_argument("--time-limit", metavar="S", type=_seconds,
                   help="stop after S seconds (> 0), keeping the partial record (default: no limit)")
    t.add_argument("--margin", type=_margin, default=0.5,
                   help="record a failure for candidates slower than the row's incumbent by more than this "
                   "fraction, >= 0 (default: 0.5)")
    t.add_argument("--workers", type=_workers, help="GPUs to use, >= 1 (default: all visible; 1 = no Dask)")
    t.add_argument("--force", action="store_true",
                   help="re-tune a library whose record already holds its measurements (same library sha256)")
    t.add_argument("--specs", default="kernel_specs", help="specs directory (default: kernel_specs)")
    t.add_argument("--rules", default="rules", help="rules directory (default: rules)")
    t.add_argument("--profiles", default=None, help=PROFILES_HELP)
    t.add_argument("--tuning", default="tuning", help="tuning records directory (default: tuning)")
    t.set_defaults(func=cmd_tune)

    ca = sub.add_parser("calibrate", help="measure this GPU and write a hardware profile",
                        description="Measure the GPU this runs on (device attributes: SMs, shared memory, "
                        "registers, L2; device-to-device copy bandwidth; bf16 and tf32 mma.sync rate with a small "
                        "NVRTC- or nvcc-compiled kernel; kernel launch latency) and write a profile marked "
                        "source: measured with the date and command. Fails with one line on a machine without a GPU.")
    ca.add_argument("--out", required=True, help="profile to write, e.g. profiles/h200-measured.yaml")
    ca.add_argument("--name", help="profile name (default: the file name without .yaml)")
    ca.add_argument("--quick", action="store_true", help="fewer repetitions")
    ca.set_defaults(func=cmd_calibrate)

    ve = sub.add_parser("vendor", help="copy a built spec into a deployable bundle (library + one manifest)",
                        description="Make a deployable bundle of a built spec: what the runtime needs of "
                        "build/<spec>/<arch>, per arch the library "
                        "(its cubins are embedded) and one manifest.json with the sha256 of each file and the build's "
                        "provenance (spec digest, rules digests, toolchain, buckets, dispatch with tuned timings and "
                        "GPU, per-kernel config, flags and resources); plus DIR/bundle.json (the index) and "
                        "DIR/README.md. Layout: DIR/<spec>/<arch>/{lib<spec>.<arch>.so, manifest.json}. Every build "
                        "file is checked against its sha256 first; the archs vendored replace their earlier copies in DIR, "
                        "the spec's other archs and other specs stay. Re-vendoring an unchanged build is byte-identical. Load the result with "
                        "kda2.load(DIR) (DIR/<spec> when it bundles several specs; runtime only: no compiler, SCons or "
                        "TVM); check it with `kda2 verify DIR`.")
    ve.add_argument("spec", help="spec name (e.g. kimi_linear_chunk) or a spec YAML (vendored under its name: field)")
    ve.add_argument("--to", required=True, metavar="DIR", help="bundle directory (created; must be new, empty or a bundle)")
    ve.add_argument("--arch", action="append", metavar="ARCH",
                    help="only this arch (repeatable; default: every arch built for the spec); the bundle's "
                    "other archs of the spec stay")
    ve.add_argument("--build-dir", default="build", help="build tree to vendor from (default: build)")
    ve.add_argument("--rules", default="rules",
                    help="rules directory whose rules.lock.json gives the matched rules' digests (default: rules)")
    ve.set_defaults(func=cmd_vendor)

    vf = sub.add_parser("verify", help="check a vendored bundle: hashes, placement, stray files, code for this GPU",
                        description="Check a bundle made by `kda2 vendor` without loading anything: bundle.json -> "
                        "each <spec>/<arch>/manifest.json -> each file by sha256 and size (and each kernel's cubin "
                        "inside the library); that every manifest belongs to its <spec>/<arch> directory; that no "
                        "unlisted library, cubin or manifest lies in the bundle, and no file is a symbolic link; and, when a GPU is visible, that "
                        "the bundle has code for it (on a CPU host it reports the archs it has). Exit 0 with one "
                        "summary line, or one line `kda2: error: ...` naming the file at fault and exit 2. Needs "
                        "only the runtime.")
    vf.add_argument("bundle", help="the bundle directory (the one holding bundle.json)")
    vf.set_defaults(func=cmd_verify)

    ca = sub.add_parser("cache", help="size of the local build cache, and pruning it (least recently used first)",
                        description="The local content-addressed cache every build fills ($KDA2_CACHE_DIR, else the checkout's "
                        "cache/): `info` counts its entries, size and last use; `prune` removes whole entries, "
                        "least recently used first (a build marks an entry used when it stores or retrieves it), "
                        "down to --max-size and/or everything unused for --older-than, and the build's stray files "
                        "(sidecars without their entry, temporaries of dead pushes and fetches) as old; nothing "
                        f"used in the last {CACHE_GRACE_S // 60} minutes. Files the build did not write are left "
                        "alone (`info` counts those in its prefix directories as other files). The remote (S3) "
                        "cache is not touched: give its bucket a lifecycle rule.")
    ca.add_argument("action", choices=("info", "prune"), help="info: count entries, size, last use, stray and other "
                    "files; prune: remove entries and stray files (needs --max-size and/or --older-than)")
    ca.add_argument("-C", "--directory", default=".", help="the checkout whose build's cache this is (default: .)")
    ca.add_argument("--dir", help="the cache directory (default: the checkout's build's: $KDA2_CACHE_DIR, relative to "
                    "the checkout, else its cache/)")
    ca.add_argument("--max-size", metavar="SIZE", help="prune: keep at most this much, e.g. 2G, >= 0 ("
                    f"{CACHE_SIZE_UNITS}); file sizes, as `du --apparent-size` counts; `info` shows both")
    ca.add_argument("--older-than", metavar="AGE", help="prune: remove what was not used for this long, e.g. 30d or "
                    f"2w, >= 0 ({CACHE_AGE_UNITS})")
    ca.add_argument("--dry-run", action="store_true", help="prune: say what would go (the first paths), remove nothing")
    ca.set_defaults(func=cmd_cache)

    # (`kda2 bench ...` is handed to kda2.bench's own parser whole by main(): `kda2 bench --help` lists its
    # subcommands recurrent, chunk, readme-table; this entry is what `kda2 --help` shows)
    be = sub.add_parser("bench", help="benchmark against FLA and cuDNN-FE on the GPU: recurrent, chunk, readme-table "
                        "(see `kda2 bench --help`)", add_help=False)
    be.add_argument("bench_args", nargs=argparse.REMAINDER)
    be.set_defaults(func=cmd_bench)
    return p


#: What the [build] extra installs (pyproject.toml) that the build-side commands import.
BUILD_EXTRA_MODULES = ("SCons", "yaml", "pydantic", "jinja2", "tvm")


def _join_dash_values(argv: list[str], options: Sequence[str]) -> list[str]:
    """`OPT -WORD` as `OPT=-WORD` for these options, when -WORD is no option of kda2's (it starts with '-' and a
    digit or '.'): argparse would refuse `--max-size -1G` as a missing value instead of naming the value."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in options and i + 1 < len(argv) and re.match(r"-[\d.]", argv[i + 1]):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `kda2 plan ... | head` ends quietly
    argv = list(sys.argv[1:] if argv is None else argv)
    # `kda2 build SPEC --candidates all -- -k TARGET`: the words after `--` are split off here and handed to scons
    # whole; everything before is parsed, options after the spec names too (a REMAINDER positional had swallowed
    # them: `kda2 build SPEC --candidates all` built the routed set).
    if argv[:1] == ["bench"]:  # kda2.bench parses its own arguments (and --help); a leading `--` is still taken
        from kda2.bench import main as bench_main

        return bench_main(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    passthrough = None
    if argv[:1] == ["build"] and "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    if not argv:   # `kda2` alone: the commands and what each does, not argparse's "arguments are required"
        build_parser().print_help(sys.stderr)   # a usage error: on stderr, exit 2, as argparse's own
        return 2
    if argv[:1] == ["cache"]:   # `--max-size -1G`: argparse takes a '-' word for an option ("expected one argument")
        argv = _join_dash_values(argv, ("--max-size", "--older-than"))   # the value's own check says what is wrong
    args = build_parser().parse_args(argv)
    if passthrough is not None:
        args.scons_args = passthrough
    try:
        if args.func is cmd_build:   # scons runs in a child: its imports are checked here, before it starts
            import importlib.util

            for mod in BUILD_EXTRA_MODULES:
                if importlib.util.find_spec(mod) is None:
                    raise ModuleNotFoundError(f"No module named {mod!r}", name=mod)
        return args.func(args)
    except ModuleNotFoundError as e:   # a runtime-only install (pip install kda2) has none of the build stages
        if (e.name or "").split(".")[0] not in BUILD_EXTRA_MODULES:
            raise
        return _fail(f"kda2 {args.command} needs the build extra (no module {e.name!r} here): "
                     "pip install 'kda2[build]'")


if __name__ == "__main__":
    sys.exit(main())
