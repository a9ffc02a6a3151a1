"""End to end: real SCons + nvcc on tiny specs, each test in its own throwaway copy of the build inputs.

SCons always runs as a subprocess (`python -m SCons -j2`: SCons keeps process-wide state) in a temporary
checkout (SConstruct, site_scons/, rules/ and a small kernel_specs/), with KDA2_CACHE_DIR on a temporary
cache and PATH led by counting wrappers for nvcc, nvlink and g++: each appends one line to a log and
execs the real tool, so "nothing was recompiled" is counted, not inferred from timings.

The spec is small on purpose (2 variants of k = v = 64); the whole file runs in a few minutes on 2 cores.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCH = "sm_90a"

if shutil.which("nvcc") is None:
    _REASON = "nvcc is not on PATH; these tests compile real kernels (CI has nvcc, so they run there)"
    print(f"\n{__name__}: skipped: {_REASON}")
    pytest.skip(_REASON, allow_module_level=True)

from kda2.plan.planner import SpecPlan, plan_all  # noqa: E402
from kda2.spec.rules import check_lock, load_rules, write_lock  # noqa: E402
from kda2.spec.model import load_specs  # noqa: E402
from kda2.compile.toolchain import ADDR_NO_RANDOMIZE, no_aslr_launcher  # noqa: E402

pytestmark = pytest.mark.compile


def _real_tools() -> dict[str, str]:
    """Absolute paths of the real tools, resolved BEFORE the wrappers go in front of PATH."""
    tools = {"nvcc": shutil.which("nvcc"), "nvlink": shutil.which("nvlink"),
             "g++": os.environ.get("CXX") or shutil.which("g++")}
    if tools["nvlink"] is None:  # kda2 falls back to <toolkit>/bin/nvlink; wrap that one then
        from kda2.compile.toolchain import find_toolchain
        tools["nvlink"] = find_toolchain().nvlink
    missing = [k for k, v in tools.items() if not v]
    assert not missing, f"nvcc is on PATH but {missing} are not: the toolkit is incomplete"
    return tools  # type: ignore[return-value]


REAL = _real_tools()
# Inherited settings that would bypass the wrappers or change what SCons does.
_SCRUB = ("CXX", "KDA2_NVCC", "CUDA_HOME", "CUDA_PATH", "SCONSFLAGS", "KDA2_CACHE_DIR")


def spec_text(name: str, k: int = 64, buckets: tuple[int, ...] = (1, 64)) -> str:
    return f"""\
# test spec: the smallest useful plan, one variant per bucket
name: {name}
family: recurrent
archs: [{ARCH}]
head_dims: {{k: {k}, v: {k}}}
features:
  gate_modes: [precomputed]
  qk_l2norm: false
  beta_sigmoid: false
  varlen: false
  state_dtype: fp32
  state_layouts: [v_first]
seq_len_buckets: [{", ".join(map(str, buckets))}]
agents:
  tile: {{v_per_warp: [4], warps: [4]}}
budget:
  max_candidates: 1
  max_registers: 255
  max_smem_bytes: 49152
"""


SPEC_A, SPEC_B = "kda2_pipe_a", "kda2_pipe_b"
# nvcc compiles at a content-named path (kda2.compile.nvcc) into <kernel name>.o.<pid>.<tid>; nvlink writes
# build/<spec>/<arch>/.<kernel name>.cubin.<pid>.<tid>.tmp. Kernel names end in the variant id.
_OUT_RE = {"nvcc": re.compile(r"-o kda2_\w+?_([0-9a-f]{12})\.o\.\d+\.\d+\b"),
           "nvlink": re.compile(r"-o \S*build/([a-z0-9_]+)/(sm_\w+)/\.kda2_\w+?_([0-9a-f]{12})\.cubin\.")}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    return sha256_bytes(path.read_bytes())


def tree_digest(build: Path) -> dict[str, str]:
    """sha256 of every build output: all regular files but nvcc's -keep scratch, the nvvm link dir, the
    planner's cache (.kda2/, not a build product) and .sconsign."""
    out = {}
    for p in sorted(build.rglob("*")):
        rel = p.relative_to(build)
        if {"keep", ".toolchain", ".kda2"} & set(rel.parts) or p.name.startswith(".sconsign"):
            continue
        if p.is_file() and not p.is_symlink():
            out[str(rel)] = sha256_file(p)
    return out


def path_independent(outputs: dict[str, str]) -> dict[str, str]:
    """Outputs minus kernel objects: nvcc -dc hashes the compile directory into the object's module id,
    so an object compiled outside kda2's content-named directory (--cache-disable in another checkout
    is still fine; a hand-run nvcc is not) may differ while everything downstream is identical."""
    return {k: v for k, v in outputs.items() if not re.search(r"_[0-9a-f]{12}\.o$", k)}


def only_spec(outputs: dict[str, str], spec: str) -> dict[str, str]:
    return {k: v for k, v in outputs.items() if k.startswith(spec + "/")}


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    wall: float
    calls: list[tuple[str, str]]  # (tool, argument string) from the wrappers' log

    def tail(self) -> str:
        return f"rc={self.rc}\n--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-3000:]}"

    def _targets(self, tool: str, must: str = "") -> list[tuple[str, str]]:
        found = []
        for t, args in self.calls:
            if t == tool and must in args:
                m = _OUT_RE[tool].search(args)
                assert m, f"cannot tell which variant this {tool} call builds: {args}"
                found.append((m.group(1), m.group(3)) if tool == "nvlink" else m.group(1))
        return sorted(found)

    def compiled(self) -> list[str]:
        """Variant id of every `nvcc -dc` (a kernel's compile knows no spec: it is shared by content)."""
        return self._targets("nvcc", " -dc ")

    def linked(self) -> list[tuple[str, str]]:
        """(spec, variant id) of every `nvlink -dlto`."""
        return self._targets("nvlink")

    def host(self) -> list[str]:
        """g++ calls that build a library (compile or link)."""
        return [a for t, a in self.calls if t == "g++" and "library." in a]

    def probes(self) -> list[str]:
        """Version/dry-run probes the toolchain lookup makes on every SCons start."""
        return [f"{t} {a}" for t, a in self.calls if "--version" in a or "-dryrun" in a]

    def tools_run(self) -> list[str]:
        """Every tool invocation that is not a probe: compiles, links, host compiles."""
        return [f"{t} {a}" for t, a in self.calls if not ("--version" in a or "-dryrun" in a)]

    def actions(self) -> list[str]:
        """kda2's progress lines: one per action SCons executed (cache retrievals print none)."""
        return [ln for ln in self.stdout.splitlines() if ln.startswith("kda2 ")]

    def retrieved(self) -> list[str]:
        return [ln for ln in self.stdout.splitlines() if ln.startswith("Retrieved ")]


class Checkout:
    """A temporary copy of the build inputs, with counting tool wrappers and its own SCons state."""

    def __init__(self, root: Path, cache: Path, specs: dict[str, str]):
        self.root, self.cache = root, cache
        root.mkdir(parents=True)
        shutil.copy2(REPO / "SConstruct", root / "SConstruct")
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(REPO / "site_scons", root / "site_scons", ignore=ignore)
        shutil.copytree(REPO / "rules", root / "rules", ignore=ignore)
        shutil.copytree(REPO / "profiles", root / "profiles", ignore=ignore)  # the targets' hardware facts
        # its own copy of the package, so a test can edit the code the build runs
        shutil.copytree(REPO / "src", root / "src", ignore=ignore)
        (root / "kernel_specs").mkdir()
        for stem, text in specs.items():
            self.write_spec(stem, text)
        # wrappers and their log live next to the checkout, not in it
        self.bin = root.parent / f"{root.name}-bin"
        self.log = root.parent / f"{root.name}-tools.log"
        self.bin.mkdir()
        for tool, real in REAL.items():
            w = self.bin / tool
            # beside each call, the personality it runs under (address-space randomisation off: DESIGN §4)
            w.write_text(f"#!/bin/sh\nprintf '%s\\t%s\\n' {tool} \"$*\" >> {shlex.quote(str(self.log))}\n"
                         f"printf '%s\\t%s\\t%s\\n' {tool} \"$(cat /proc/$$/personality 2>/dev/null)\" \"$*\" "
                         f">> {shlex.quote(str(self.log))}.personality\n"
                         f"exec {shlex.quote(real)} \"$@\"\n")
            w.chmod(0o755)

    @property
    def build(self) -> Path:
        return self.root / "build"

    @property
    def rules(self) -> Path:
        return self.root / "rules"

    def out(self, spec: str = SPEC_A) -> Path:
        return self.build / spec / ARCH

    def cubin(self, vid: str, spec: str = SPEC_A) -> Path:
        (path,) = self.out(spec).glob(f"kda2_*_{vid}.cubin")
        return path

    def edit(self, rel: str, old: str, new: str) -> None:
        """Replace `old` (must occur) by `new` in the checkout's copy of src/kda2/<rel>."""
        path = self.root / "src" / "kda2" / rel
        text = path.read_text()
        assert old in text, f"{rel} no longer contains {old!r}: update the test"
        path.write_text(text.replace(old, new, 1))

    def write_spec(self, stem: str, text: str) -> None:
        (self.root / "kernel_specs" / f"{stem}.yaml").write_text(text)

    def plans(self) -> dict[str, SpecPlan]:
        plans, _ = plan_all(load_specs(self.root / "kernel_specs"), load_rules(self.rules))
        return {p.spec.name: p for p in plans}

    def variant_ids(self, spec: str = SPEC_A) -> list[str]:
        return [pv.id for pv in self.plans()[spec].variants]

    def outputs(self) -> dict[str, str]:
        return tree_digest(self.build)

    def env(self, path: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env["PATH"] = path if path is not None else f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"
        env["KDA2_CACHE_DIR"] = str(self.cache)
        env["PYTHONPATH"] = os.pathsep.join([str(self.root / "src")] + ([os.environ["PYTHONPATH"]]
                                                                         if os.environ.get("PYTHONPATH") else []))
        return env

    def start(self, *args: str, path: str | None = None, new_session: bool = False) -> subprocess.Popen:
        self.log.write_text("")
        self._t0 = time.monotonic()
        self._out = open(self.root.parent / f"{self.root.name}-scons.out", "w+")
        self._err = open(self.root.parent / f"{self.root.name}-scons.err", "w+")
        return subprocess.Popen([sys.executable, "-m", "SCons", "-j2", *args], cwd=self.root,
                                env=self.env(path), stdout=self._out, stderr=self._err,
                                start_new_session=new_session)

    def finish(self, proc: subprocess.Popen, timeout: float = 600) -> Run:
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        wall = time.monotonic() - self._t0
        outs = []
        for f in (self._out, self._err):
            f.seek(0)
            outs.append(f.read())
            f.close()
        return Run(rc, outs[0], outs[1], wall, self.calls())

    def scons(self, *args: str, path: str | None = None) -> Run:
        return self.finish(self.start(*args, path=path))

    def calls(self) -> list[tuple[str, str]]:
        if not self.log.exists():
            return []
        return [tuple(ln.split("\t", 1)) for ln in self.log.read_text().splitlines() if "\t" in ln]  # type: ignore[misc]


@dataclass
class Reference:
    checkout: Checkout
    run: Run
    outputs: dict[str, str]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Reference:
    """One cold build of SPEC_A with a fresh cache; the other tests copy its cache and compare to its bytes."""
    base = tmp_path_factory.mktemp("reference")
    co = Checkout(base / "repo", base / "cache", {"a": spec_text(SPEC_A)})
    run = co.scons()
    assert run.rc == 0, run.tail()
    print(f"\n[build-pipeline] cold build of {SPEC_A} ({len(co.variant_ids())} variants, -j2): {run.wall:.1f}s")
    return Reference(co, run, co.outputs())


def warm_checkout(reference: Reference, tmp_path: Path, specs: dict[str, str] | None = None) -> Checkout:
    """A new checkout in another directory whose cache starts as a copy of the reference build's."""
    shutil.copytree(reference.checkout.cache, tmp_path / "cache")
    return Checkout(tmp_path / "repo", tmp_path / "cache", specs or {"a": spec_text(SPEC_A)})


# ---- 1. cold build, then a no-op ------------------------------------------------------------------

def test_cold_build_outputs_and_noop(reference: Reference):
    co, run = reference.checkout, reference.run
    ids = co.variant_ids()
    assert len(ids) == 2, f"the test spec should plan 2 variants (buckets 1 and 64), got {ids}"
    out = co.out()
    assert (out / "manifest.json").is_file()
    assert (out / f"lib{SPEC_A}.{ARCH}.so").is_file()
    assert sorted(p.stem.rsplit("_", 1)[1] for p in out.glob("*.cubin")) == sorted(ids)
    for vid in ids:
        assert co.cubin(vid).read_bytes()[:4] == b"\x7fELF"
    # every variant was compiled and linked exactly once, the library built once (compile + link)
    assert run.compiled() == sorted(ids)
    assert run.linked() == sorted((SPEC_A, v) for v in ids)
    assert len(run.host()) == 2, run.host()
    manifest = json.loads((out / "manifest.json").read_text())
    assert [v["id"] for v in manifest["variants"]] == ids
    for rel, digest in manifest["files"].items():
        assert sha256_file(out / rel) == digest, f"manifest hash of {rel} does not match the file"

    # the device tools ran with address-space randomisation off, where this host allows it (DESIGN §4)
    if no_aslr_launcher():
        seen = [ln.split("\t", 2) for ln in Path(f"{co.log}.personality").read_text().splitlines()]
        device = [(tool, p) for tool, p, args in seen
                  if tool in ("nvcc", "nvlink") and not ("--version" in args or "-dryrun" in args)]
        assert len(device) == 2 * len(ids) and all(p and int(p, 16) & ADDR_NO_RANDOMIZE for _, p in device), seen
    else:
        assert "address-space randomisation cannot be turned off here" in run.stderr, run.tail()

    noop = co.scons("-q")
    assert noop.rc == 0, "scons -q right after a build says something is out of date\n" + noop.tail()
    assert noop.tools_run() == [], noop.tools_run()
    assert co.outputs() == reference.outputs
    print(f"\n[build-pipeline] no-op `scons -q`: {noop.wall:.2f}s "
          f"(toolchain probes run on every start: {noop.probes()})")


# ---- 2. rm -rf build: everything comes back from the cache --------------------------------------

def test_rebuild_from_cache_is_byte_identical(reference: Reference, tmp_path: Path):
    co = warm_checkout(reference, tmp_path)
    sidecars = sorted(co.cache.rglob("*.sha256"))
    for side in sidecars:   # last used a year ago: a retrieval marks its entry used (kda2 cache prune's LRU)
        os.utime(side, (time.time() - 365 * 86400,) * 2)
    # another directory, same cache: every node must be a cache hit (no absolute path in any key)
    first = co.scons()
    assert first.rc == 0, first.tail()
    assert first.tools_run() == [] and first.actions() == [], first.tail()
    assert co.outputs() == reference.outputs
    used = [s for s in sidecars if time.time() - s.stat().st_mtime < 3600]
    assert len(used) == len(first.retrieved()) > 0, (len(used), len(first.retrieved()))

    shutil.rmtree(co.build)
    question = co.scons("-q")
    assert question.rc != 0, "scons -q must report a deleted build/ as out of date"
    again = co.scons()
    assert again.rc == 0, again.tail()
    assert again.calls and again.tools_run() == [], again.tools_run()   # the wrappers did see the probes
    assert again.actions() == [], again.actions()
    assert len(again.retrieved()) >= len(reference.outputs)
    assert co.outputs() == reference.outputs
    print(f"\n[build-pipeline] rm -rf build && scons (all from cache): {again.wall:.2f}s")


# ---- 3. a spec edit rebuilds only that spec's new variants ---------------------------------------

def test_spec_edit_rebuilds_only_that_spec(reference: Reference, tmp_path: Path):
    b_text = spec_text(SPEC_B, k=128, buckets=(1, 64))
    co = warm_checkout(reference, tmp_path, {"a": spec_text(SPEC_A), "b": b_text})
    first = co.scons()
    assert first.rc == 0, first.tail()
    b_ids = co.variant_ids(SPEC_B)
    assert first.compiled() == sorted(b_ids), "spec A must come from the cache"
    assert only_spec(co.outputs(), SPEC_A) == reference.outputs
    before = co.outputs()

    co.write_spec("b", spec_text(SPEC_B, k=128, buckets=(1, 256)))  # bucket 64 -> 256: a new dispatch row
    assert co.variant_ids(SPEC_B) == b_ids, "a bucket is a dispatch row, not a kernel: same kernels expected"
    edit = co.scons()
    assert edit.rc == 0, edit.tail()
    assert edit.compiled() == [] and edit.linked() == [], edit.tools_run()
    assert edit.host() and all(f"build/{SPEC_B}/" in a for a in edit.host()), edit.host()  # the table changed
    assert not [c for c in edit.tools_run() if SPEC_A in c], "spec A was touched by an edit of spec B"
    assert only_spec(co.outputs(), SPEC_A) == only_spec(before, SPEC_A)

    co.write_spec("b", b_text.replace("v_per_warp: [4]", "v_per_warp: [8]"))  # a knob: new kernels
    new = set(co.variant_ids(SPEC_B)) - set(b_ids)
    assert len(new) == 2, new
    knob = co.scons()
    assert knob.rc == 0, knob.tail()
    assert knob.compiled() == sorted(new), knob.tools_run()
    assert knob.linked() == sorted((SPEC_B, v) for v in new), knob.tools_run()
    assert not [c for c in knob.tools_run() if SPEC_A in c], "spec A was touched by an edit of spec B"

    co.write_spec("b", b_text)  # revert: library and manifest of the old bucket set come from the cache
    back = co.scons()
    assert back.rc == 0, back.tail()
    assert back.tools_run() == [] and back.actions() == [], back.tail()
    assert any(f"{SPEC_B}/{ARCH}/manifest.json" in ln for ln in back.retrieved()), back.retrieved()
    now = co.outputs()
    assert {k: now.get(k) for k in before} == before


def test_default_build_compiles_the_routed_variants_and_all_adds_the_rest(reference: Reference, tmp_path: Path):
    """`scons` compiles what the dispatch routes to (manifest "candidates": "routed"); `scons CANDIDATES=all` adds
    the other candidates without recompiling those and lists every one, in build/_candidates, leaving the routed
    tree (what ships) as it was; another value fails with one line."""
    text = (spec_text(SPEC_A).replace("max_candidates: 1", "max_candidates: 2")
            .replace("  tile: {v_per_warp: [4], warps: [4]}\n", "  tile: {v_per_warp: [4], warps: [4]}\n"
                     "  reduce: [scatter, butterfly]\n"))
    co = warm_checkout(reference, tmp_path, {"a": text})
    plan = co.plans()[SPEC_A]
    routed = sorted({d["variant"] for d in plan.dispatch})
    every = sorted(co.variant_ids())
    assert len(routed) == 2 and len(every) == 4, (routed, every)
    first = co.scons()
    assert first.rc == 0, first.tail()
    manifest = json.loads((co.out() / "manifest.json").read_text())
    assert manifest["candidates"] == "routed" and sorted(v["id"] for v in manifest["variants"]) == routed
    cached = set(reference.checkout.variant_ids())  # the reference build's kernels come from the shared cache
    assert sorted(first.compiled()) == sorted(set(routed) - cached), first.tools_run()
    shipped = tree_digest(co.out())
    rest = co.scons("CANDIDATES=all")
    assert rest.rc == 0, rest.tail()
    assert sorted(rest.compiled()) == sorted(set(every) - set(routed) - cached), rest.tools_run()
    assert not set(rest.compiled()) & set(routed)
    manifest = json.loads((co.build / "_candidates" / SPEC_A / ARCH / "manifest.json").read_text())
    assert manifest["candidates"] == "all" and sorted(v["id"] for v in manifest["variants"]) == every
    from kda2.tools.tune import _planned  # what kda2 tune reads where the plan cache is not beside the tree
    hw, budget = _planned(manifest)
    assert hw.name == plan.profile.name and budget.allow_spills == plan.spec.budget.allow_spills
    assert tree_digest(co.out()) == shipped
    assert co.scons("-q").rc == 0 and co.scons("-q", "CANDIDATES=all").rc == 0
    bad = co.scons("CANDIDATES=some")
    assert bad.rc == 2 and bad.stderr.strip().splitlines()[-1].startswith("kda2: error: CANDIDATES='some'; allowed: "
                                                                          "routed, all"), bad.tail()
    assert "Traceback" not in bad.stderr


# ---- 4. rules: a version bump rebuilds exactly the variants it matches --------------------------

def rule_text(version: int, pretty: bool = False) -> str:
    if not pretty:
        return (f"id: 100\nversion: {version}\nmatch:\n  bucket: 64\n  config: {{v_per_warp: 4}}\n"
                f"action: flags\nflags: [\"-Xptxas=-O2\"]\nreason: test rule\nevidence: test_build_pipeline\n")
    # the same rule, only reformatted and commented
    return (f"# a comment that must not rebuild anything\n\nid:   100\nversion: {version}   # bumped\n"
            f"match: {{bucket: 64, config: {{v_per_warp: 4}}}}\naction: 'flags'\nflags:\n  - -Xptxas=-O2\n"
            f"reason: >-\n  test rule\nevidence: \"test_build_pipeline\"\n")


def test_rule_version_bump_rebuilds_only_matched_variants(reference: Reference, tmp_path: Path):
    co = warm_checkout(reference, tmp_path)
    base = co.scons()
    assert base.rc == 0 and base.tools_run() == [], base.tail()
    rule, lock = co.rules / "0100-test.yaml", co.rules / "rules.lock.json"
    lock_orig = lock.read_text()

    def matched() -> list[tuple[str, str]]:
        return sorted((name, pv.id) for name, p in co.plans().items() for pv in p.variants
                      if any(r.startswith("0100@") for r in pv.rules))

    rule.write_text(rule_text(1))
    write_lock(co.rules)
    lock_v1 = lock.read_text()
    m = matched()
    assert len(m) == 1 and len(co.variant_ids()) == 2, "the rule should match one of the two variants"
    r1 = co.scons()
    assert r1.rc == 0, r1.tail()
    assert r1.compiled() == [vid for _, vid in m] and r1.linked() == m, r1.tools_run()
    assert not [a for a in r1.actions() if a.startswith(("kda2 tir", "kda2 render"))], \
        "a flag-only rule must not re-run the TIR stage or the render: " + "\n".join(r1.actions())
    assert all("-Xptxas=-O2" in a for t, a in r1.calls if t == "nvcc" and " -dc " in a)
    out_v1 = co.outputs()
    cubin = str(co.cubin(m[0][1]).relative_to(co.build))
    print(f"\n[build-pipeline] -Xptxas=-O2 changed the matched cubin: {out_v1[cubin] != reference.outputs[cubin]}")

    rule.write_text(rule_text(2))  # version bump, same effect: the sidecar and manifest say v2, no tool runs
    write_lock(co.rules)
    assert matched() == m
    r2 = co.scons()
    assert r2.rc == 0, r2.tail()
    assert r2.tools_run() == [], r2.tools_run()
    assert sorted(a.split()[1] for a in r2.actions()) == ["manifest", "why"], r2.actions()
    out_v2 = co.outputs()

    # rewording a rule's evidence compiles nothing, not even a sidecar changes (`kda2 rules check` would
    # ask for a version bump; the build does not care what the prose says)
    rule.write_text(rule_text(2).replace("evidence: test_build_pipeline", "evidence: reworded evidence"))
    r2b = co.scons()
    assert r2b.rc == 0 and r2b.tools_run() == [] and r2b.actions() == [], r2b.tail()
    assert co.outputs() == out_v2
    rule.write_text(rule_text(2))

    rule.write_text(rule_text(2, pretty=True))
    assert check_lock(co.rules) == [], "a reformat must keep the locked body digest"
    r3 = co.scons()
    assert r3.rc == 0, r3.tail()
    assert r3.tools_run() == [] and r3.actions() == [], r3.tail()
    assert co.outputs() == out_v2

    rule.write_text(rule_text(1))  # back to v1: everything it built is in the cache
    lock.write_text(lock_v1)
    r4 = co.scons()
    assert r4.rc == 0, r4.tail()
    assert r4.tools_run() == [] and r4.actions() == [], r4.tail()
    assert co.outputs() == out_v1

    rule.unlink()  # back to no rule at all: the reference build's bytes
    lock.write_text(lock_orig)
    r5 = co.scons()
    assert r5.rc == 0, r5.tail()
    assert r5.tools_run() == [] and r5.actions() == [], r5.tail()
    assert co.outputs() == reference.outputs


# ---- 4b. the code an action runs is in its signature ---------------------------------------------

def _kinds(run: Run) -> list[str]:
    """The kinds of actions SCons ran (render, tir, nvcc, ...), one entry per action."""
    return sorted(a.split()[1] for a in run.actions())


def _rerun_after_edit(reference: Reference, tmp_path: Path, rel: str, old: str, new: str) -> tuple[Checkout, Run]:
    co = warm_checkout(reference, tmp_path)
    assert co.scons().rc == 0
    co.edit(rel, old, new)
    question = co.scons("-q")
    assert question.rc != 0, f"an edit to src/kda2/{rel} left `scons -q` up to date\n" + question.tail()
    run = co.scons()
    assert run.rc == 0, run.tail()
    settled = co.scons("-q")   # one (parallel) build brings the tree up to date
    assert settled.rc == 0, f"after an edit to src/kda2/{rel}, one build left `scons -q` out of date\n" + settled.tail()
    return co, run


def test_comment_edit_to_render_rerenders_but_compiles_nothing(reference: Reference, tmp_path: Path):
    co, run = _rerun_after_edit(reference, tmp_path, "codegen/render.py", "from __future__ import annotations",
                                "from __future__ import annotations\n# a comment-only edit")
    n = len(co.variant_ids())
    assert _kinds(run) == ["render"] * (n + 1), run.actions()  # every kernel .cu and library.cpp
    assert run.tools_run() == [], run.tools_run()
    assert co.outputs() == reference.outputs


def test_symbol_rename_in_render_recompiles_every_kernel(reference: Reference, tmp_path: Path):
    """The defect of 2026-11-30: a renamed kernel symbol in the render left the old kernels up to date."""
    entry = 'return f"kda2_recurrent_{INPUT_DTYPES[dtype][1]}{STATE_DTYPES[state][1]}{vid}"'
    co, run = _rerun_after_edit(reference, tmp_path, "codegen/render.py", entry, entry.replace("recurrent", "renamed"))
    ids = co.variant_ids()
    assert run.compiled() == sorted(ids) and run.linked() == sorted((SPEC_A, v) for v in ids), run.tools_run()
    assert "tir" not in _kinds(run), run.actions()
    for vid in ids:
        assert f"kda2_renamed_{vid}".encode() in co.cubin(vid).read_bytes()
    assert co.outputs() != reference.outputs
    co.edit("codegen/render.py", entry.replace("recurrent", "renamed"), entry)
    back = co.scons()  # reverting restores every file from the cache
    assert back.rc == 0 and back.tools_run() == [], back.tail()
    assert co.outputs() == reference.outputs
    # ... in one (parallel) build: the objects' headers are recorded with them, so the tree is up to date at once
    # (scanning the re-rendered sources instead, objects restored from the cache had been recorded without their
    # headers and `scons -q` found them "new": out of date after a successful build)
    q = co.scons("-q")
    assert q.rc == 0, q.tail()


def test_edit_to_ptxas_checks_reruns_only_the_resource_check(reference: Reference, tmp_path: Path):
    co, run = _rerun_after_edit(reference, tmp_path, "compile/ptxas.py", "def check(",
                                "# a comment-only edit\ndef check(")
    assert _kinds(run) == ["resources"] * len(co.variant_ids()), run.actions()
    assert run.tools_run() == [], run.tools_run()
    assert co.outputs() == reference.outputs


def test_edit_to_manifest_writer_reruns_only_the_manifest(reference: Reference, tmp_path: Path):
    co, run = _rerun_after_edit(reference, tmp_path, "artifact/manifest.py", 'm["files"] = dict(sorted(rel.items()))',
                                'm["files"] = dict(sorted(rel.items()))\n    m["edited"] = True')
    assert _kinds(run) == ["manifest"], run.actions()
    assert run.tools_run() == []
    assert json.loads((co.out() / "manifest.json").read_text())["edited"] is True


def test_edit_to_planner_helper_reruns_its_users_and_compiles_nothing(reference: Reference, tmp_path: Path):
    # plan/variant.py names kernels: the TIR stage and the render import it
    co, run = _rerun_after_edit(reference, tmp_path, "plan/variant.py", "def variant_id(",
                                "# a comment-only edit\ndef variant_id(")
    n = len(co.variant_ids())
    assert _kinds(run) == sorted(["render"] * (n + 1) + ["tir"] * n), run.actions()
    assert run.tools_run() == [], run.tools_run()
    assert co.outputs() == reference.outputs


def test_reworded_agent_reason_compiles_nothing(reference: Reference, tmp_path: Path):
    co = warm_checkout(reference, tmp_path)
    assert co.scons().rc == 0
    co.edit("plan/agents/recurrent.py", "while token t updates the state", "while each token step waits on the last")
    run = co.scons()
    assert run.rc == 0, run.tail()
    assert run.tools_run() == [], run.tools_run()
    assert _kinds(run) == ["manifest", "why"], run.actions()  # one kernel's sidecar, and the manifest
    why = [json.loads(p.read_text()) for p in co.out().glob("*.why.json")]
    assert any("each token step waits on the last" in r for w in why for _, r in w["reasons"])
    assert not any("waits on the last" in p.read_text() for p in co.out().glob("*.cu"))


# ---- 5. a corrupted cache entry is detected and rebuilt ------------------------------------------

def test_corrupt_cache_entry_is_detected_and_rebuilt(reference: Reference, tmp_path: Path):
    co = warm_checkout(reference, tmp_path)
    assert co.scons().rc == 0
    vid = co.variant_ids()[0]
    good = reference.checkout.cubin(vid).read_bytes()
    entries = [p for p in co.cache.rglob("*") if p.is_file() and not p.name.endswith(".sha256")
               and p.read_bytes()[:4] == b"\x7fELF" and p.read_bytes() == good]
    assert len(entries) == 1, f"expected one cache entry holding {vid}'s cubin, found {entries}"
    entry = entries[0]
    sidecar = Path(str(entry) + ".sha256")
    assert sidecar.read_text().strip() == sha256_bytes(good)
    bad = bytearray(good)
    mid = len(bad) // 2
    bad[mid:mid + 16] = bytes(b ^ 0xFF for b in bad[mid:mid + 16])
    entry.write_bytes(bytes(bad))  # same size, sidecar kept

    shutil.rmtree(co.build)
    run = co.scons()
    assert run.rc == 0, run.tail()
    assert "corrupt" in run.stderr, run.tail()
    assert run.linked() == [(SPEC_A, vid)], run.tools_run()   # rebuilt from the (intact) kernel.o
    assert run.compiled() == [], run.tools_run()
    assert co.cubin(vid).read_bytes() == good
    assert co.outputs() == reference.outputs
    assert entry.read_bytes() == good and sidecar.read_text().strip() == sha256_bytes(good), \
        "the rebuilt cubin should be pushed back as a healthy entry"

    shutil.rmtree(co.build)
    again = co.scons()
    assert again.rc == 0 and "corrupt" not in again.stderr, again.tail()
    assert again.tools_run() == [], again.tools_run()
    assert co.outputs() == reference.outputs


def test_entry_without_its_sidecar_is_paired_by_the_build_that_makes_it_again(reference: Reference, tmp_path: Path):
    """An entry whose sidecar is missing (a push that died between the two, or one still in flight) is a miss, never
    deleted; the build that makes the target again records the sidecar when the entry holds exactly its bytes, so
    the next build takes it from the cache instead of missing for good."""
    co = warm_checkout(reference, tmp_path)
    vid = co.variant_ids()[0]
    good = reference.checkout.cubin(vid).read_bytes()
    (entry,) = [p for p in co.cache.rglob("*") if p.is_file() and not p.name.endswith(".sha256")
                and p.read_bytes() == good]
    sidecar = Path(str(entry) + ".sha256")
    sidecar.unlink()
    run = co.scons()
    assert run.rc == 0, run.tail()
    assert run.linked() == [(SPEC_A, vid)] and run.compiled() == [], run.tools_run()   # the miss, made again
    assert entry.read_bytes() == good and sidecar.read_text().strip() == sha256_bytes(good)
    shutil.rmtree(co.build)
    again = co.scons()
    assert again.rc == 0 and again.tools_run() == [], again.tools_run()   # now a hit
    assert co.outputs() == reference.outputs


def test_output_changed_in_place_is_made_again_not_signed(reference: Reference, tmp_path: Path):
    """An output changed after the build (a flipped byte in the library, an edited rendered source, a cubin from
    elsewhere) is not what its inputs' signatures say: SCons alone would keep it and the manifest would sign it. The
    build removes it with a warning naming it, and it is made again (from the cache, or by its tool without one);
    `scons -q` reports the tree out of date and removes nothing. An untouched tree stays a no-op."""
    co = warm_checkout(reference, tmp_path)
    assert co.scons().rc == 0
    lib = next(co.out().glob("lib*.so"))
    vid = co.variant_ids()[0]
    src = next(co.out().glob(f"kda2_*_{vid}.cu"))
    good = {p: p.read_bytes() for p in (lib, co.cubin(vid), src)}

    def flip(path: Path) -> None:
        b = bytearray(path.read_bytes())
        b[len(b) // 2] ^= 0xFF
        path.write_bytes(bytes(b))

    for path in good:
        flip(path)
    q = co.scons("-q")
    assert q.rc == 1, q.tail()   # question mode: out of date, and nothing removed
    for path in good:
        assert f"{path.relative_to(co.root)} changed since this tree built it" in q.stderr, q.tail()
        assert path.exists() and path.read_bytes() != good[path]
    run = co.scons()
    assert run.rc == 0, run.tail()
    for path in good:
        assert path.read_bytes() == good[path]
    assert run.tools_run() == [], run.tools_run()   # all three came back from the cache
    manifest = json.loads((co.out() / "manifest.json").read_text())
    assert manifest["files"][lib.name] == sha256_bytes(good[lib]), manifest["files"]
    assert co.outputs() == reference.outputs

    shutil.rmtree(co.cache)   # without a cache the tool makes it again
    co.cache.mkdir()
    flip(lib)
    relinked = co.scons()
    assert relinked.rc == 0 and f"{lib.relative_to(co.root)} changed" in relinked.stderr, relinked.tail()
    assert relinked.host() and relinked.compiled() == [], relinked.tools_run()   # linked again, nothing compiled
    assert lib.read_bytes() == good[lib]
    again = co.scons()
    assert again.rc == 0 and "changed since" not in again.stderr and again.tools_run() == [], again.tail()


def test_dry_run_and_question_leave_the_cache_alone(reference: Reference, tmp_path: Path):
    """`scons -n` and `scons -q` over a build directory that does not match the cache (here: none at all) retrieve
    nothing, so there is nothing to verify: no "corrupt" report, every entry and sidecar kept (a dry run once hashed
    the stale local file and deleted the healthy entry); a real build afterwards comes entirely from the cache."""
    co = warm_checkout(reference, tmp_path)
    assert co.scons().rc == 0
    before = sorted((p.relative_to(co.cache), p.read_bytes()) for p in co.cache.rglob("*") if p.is_file())
    shutil.rmtree(co.build)
    dry = co.scons("-n")
    assert dry.rc == 0 and "corrupt" not in dry.stderr, dry.tail()
    question = co.scons("-q")
    assert question.rc != 0 and "corrupt" not in question.stderr, question.tail()  # not up to date: no build dir
    after = sorted((p.relative_to(co.cache), p.read_bytes()) for p in co.cache.rglob("*") if p.is_file())
    assert after == before
    assert not co.build.exists() or not any(co.build.rglob("*.cubin"))
    run = co.scons()
    assert run.rc == 0 and "corrupt" not in run.stderr and run.tools_run() == [], run.tail()
    assert co.outputs() == reference.outputs


# ---- 6. two checkouts, one cache, at the same time ------------------------------------------------

def cache_problems(cache: Path) -> list[str]:
    """Entries whose sidecar is missing or disagrees, and leftovers of interrupted pushes."""
    problems = []
    for p in sorted(cache.rglob("*")):
        if p.is_dir():
            if p.parent != cache:
                problems.append(f"stray directory {p}")
            continue
        if p.parent == cache:  # config, CACHEDIR.TAG
            continue
        if p.name.endswith(".sha256"):
            if not Path(str(p)[:-len(".sha256")]).exists():
                problems.append(f"sidecar without entry {p}")
            continue
        if not re.fullmatch(r"[0-9a-f]{64}", p.name):
            problems.append(f"stray file {p}")
            continue
        side = Path(str(p) + ".sha256")
        if not side.exists():
            problems.append(f"entry without sidecar {p}")
        elif side.read_text().strip() != sha256_file(p):
            problems.append(f"entry does not match its sidecar {p}")
    return problems


def test_two_checkouts_share_one_cache_concurrently(reference: Reference, tmp_path: Path):
    cache = tmp_path / "shared-cache"  # does not exist yet: both builds create it
    one = Checkout(tmp_path / "one", cache, {"a": spec_text(SPEC_A)})
    two = Checkout(tmp_path / "two", cache, {"a": spec_text(SPEC_A)})
    p1, p2 = one.start(), two.start()
    r1, r2 = one.finish(p1), two.finish(p2)
    assert r1.rc == 0, r1.tail()
    assert r2.rc == 0, r2.tail()
    assert "corrupt" not in r1.stderr + r2.stderr
    assert path_independent(one.outputs()) == path_independent(two.outputs()) \
        == path_independent(reference.outputs)
    assert one.outputs() == two.outputs()  # kernel.o included: compiled at a content-named path
    print(f"\n[build-pipeline] concurrent builds: {r1.wall:.1f}s / {r2.wall:.1f}s, "
          f"nvcc -dc {len(r1.compiled())} + {len(r2.compiled())}")
    problems = cache_problems(cache)
    assert problems == []

    shutil.rmtree(one.build)
    again = one.scons()
    assert again.rc == 0 and again.tools_run() == [] and "corrupt" not in again.stderr, again.tail()
    assert path_independent(one.outputs()) == path_independent(reference.outputs)


def test_cache_force_push_keeps_sidecars_consistent(reference: Reference, tmp_path: Path):
    """Populating a shared cache from a checkout that compiled locally must not spoil existing entries."""
    co = warm_checkout(reference, tmp_path)
    local = co.scons("--cache-disable")  # compiles here: kernel.o differs from the cached one
    assert local.rc == 0 and len(local.compiled()) == 2, local.tail()
    force = co.scons("--cache-force")    # push everything up to date (SCons skips existing entries)
    assert force.rc == 0, force.tail()
    assert cache_problems(co.cache) == []
    # what another checkout then sees: all of it from the cache, nothing "corrupt"
    other = Checkout(tmp_path / "other", co.cache, {"a": spec_text(SPEC_A)})
    run = other.scons()
    assert run.rc == 0, run.tail()
    assert "corrupt" not in run.stderr and run.tools_run() == [], run.tail()


# ---- 7. SIGKILL mid-build, then restart -----------------------------------------------------------

def test_killed_build_recovers(reference: Reference, tmp_path: Path):
    co = Checkout(tmp_path / "repo", tmp_path / "cache", {"a": spec_text(SPEC_A)})
    proc = co.start(new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if any(t == "nvcc" and " -dc " in a for t, a in co.calls()):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the build ended (or never reached nvcc) before it could be killed"
    time.sleep(0.5)  # let nvcc get going
    os.killpg(proc.pid, signal.SIGKILL)
    killed = co.finish(proc)
    assert killed.rc == -signal.SIGKILL
    assert co.scons("-q").rc != 0, "the killed build cannot have finished"

    run = co.scons()
    assert run.rc == 0, run.tail()
    assert len(run.compiled()) >= 1
    assert co.scons("-q").rc == 0
    assert cache_problems(co.cache) == []
    recovered = co.outputs()
    assert path_independent(recovered) == path_independent(reference.outputs)

    # a clean build in this same directory, cache off: equal bytes, kernel.o included
    shutil.rmtree(co.build)
    for f in co.root.glob(".sconsign*"):
        f.unlink()
    clean = co.scons("--cache-disable")
    assert clean.rc == 0, clean.tail()
    assert len(clean.compiled()) == len(co.variant_ids())
    assert co.outputs() == recovered


# ---- 8. bad inputs: one line, "kda2: error:", no traceback ---------------------------------------

def _bad_rule(co: Checkout) -> None:
    (co.rules / "0101-bad.yaml").write_text(
        "id: 101\nversion: 1\nmatch:\n  config: {bogus_knob: 1}\naction: forbid\nreason: r\nevidence: e\n")


BAD_INPUTS = {
    "malformed_yaml": (lambda co: co.write_spec("a", spec_text(SPEC_A) + "archs: [sm_90a\n"), "malformed YAML"),
    "unknown_field": (lambda co: co.write_spec("a", spec_text(SPEC_A) + "colour: blue\n"), "'colour'"),
    "bad_arch": (lambda co: co.write_spec("a", spec_text(SPEC_A).replace(f"[{ARCH}]", "[sm_99]")), "archs"),
    "empty_buckets": (lambda co: co.write_spec("a", spec_text(SPEC_A).replace("[1, 64]", "[]")), "seq_len_buckets"),
    "rule_unknown_field": (_bad_rule, "'bogus_knob'"),
    "nvcc_missing": (None, "nvcc"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_fails_with_one_line(case: str, tmp_path: Path):
    co = Checkout(tmp_path / "repo", tmp_path / "cache", {"a": spec_text(SPEC_A)})
    breaker, needle = BAD_INPUTS[case]
    path = None
    if breaker is not None:
        breaker(co)
    else:  # a PATH holding just what a shell needs, and no nvcc
        tools = tmp_path / "no-nvcc-bin"
        tools.mkdir()
        for name in ("sh", "mkdir", "sed", "rm", "cat"):
            found = shutil.which(name)
            if found:
                (tools / name).symlink_to(found)
        path = str(tools)
        assert shutil.which("nvcc", path=path) is None
    run = co.scons(path=path)
    assert run.rc != 0, run.tail()
    assert "Traceback" not in run.stdout + run.stderr, run.tail()
    errors = [ln for ln in run.stderr.splitlines() if ln.strip() and not ln.startswith("kda2: warning:")]
    assert len(errors) == 1, run.tail()
    assert errors[0].startswith("kda2: error:") and needle in errors[0], errors[0]
    assert run.tools_run() == []
    print(f"\n[build-pipeline] {case}: {errors[0]}")


def test_rule_matching_nothing_warns_and_builds(reference: Reference, tmp_path: Path):
    co = warm_checkout(reference, tmp_path)
    (co.rules / "0101-nomatch.yaml").write_text(
        "id: 101\nversion: 1\nmatch:\n  config: {warps: 8}\naction: forbid\nreason: r\nevidence: e\n")
    write_lock(co.rules)
    run = co.scons()
    assert run.rc == 0, run.tail()
    warnings = [ln for ln in run.stderr.splitlines() if ln.startswith("kda2: warning:") and "0101-nomatch" in ln]
    assert len(warnings) == 1 and "matches no current variant" in warnings[0], run.tail()
    assert run.tools_run() == []
    assert co.outputs() == reference.outputs
