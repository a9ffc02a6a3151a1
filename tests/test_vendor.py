"""`kda2 vendor` / `kda2 verify` / `scons vendor` and loading a bundle (kda2.artifact.bundle, kda2.tools.vendor).

Most tests run twice: on a synthetic build (a fake library that embeds fake cubins: verify never opens a
library, so every check runs in the unit suite) and, marked `compile`, on the real build in ./build (read
only: the specs are copied to a temporary build directory first; the tests fail, not skip, when it is
missing). Loading a bundle needs the real build; one test installs the runtime alone into a fresh venv (as
tests/test_packaging.py does) and loads and verifies a bundle there; one builds a tiny spec and runs
`scons vendor`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import kda2
from kda2.artifact import bundle
from kda2.artifact.abi import ABI_VERSION
from kda2.artifact.bundle import BundleError
from kda2.runtime import loader
from kda2.runtime.errors import ArtifactError
from kda2.tools import vendor as vendor_mod

from test_cli import tiny_spec  # noqa: E402  (tests/ is on sys.path)


REPO = Path(__file__).resolve().parents[1]
def _fixture_rules() -> Path:
    """A locked rules directory holding the rule the synthetic sm_80 manifests name (0002@v1): test data, not
    one of the repository's rules (those come from real failures)."""
    import tempfile

    from kda2.spec.rules import write_lock

    d = Path(tempfile.mkdtemp(prefix="kda2-vendor-rules-"))
    (d / "0002-sm80-warps.yaml").write_text(
        'id: 2\nversion: 1\nmatch: {arch: sm_80}\naction: flags\nflags: ["-Xptxas=-warn-spills"]\n'
        "reason: report spills on Ampere.\nevidence: test fixture\n")
    write_lock(d)
    return d


RULES = _fixture_rules()
BUILD_ONLY = ("SCons", "jinja2", "tvm", "pydantic", "yaml")
_SCRUB = ("KDA2_CACHE_DIR", "SCONSFLAGS", "KDA2_LIBRARY", "KDA2_BUILD_DIR")


def _env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    e["PYTHONPATH"] = os.pathsep.join([str(REPO / "src")] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    return e


def cli(*args, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kda2.tools.cli", *map(str, args)], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)


def one_error_line(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, f"rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kda2: error: "), p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    return lines[0]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def mapped(path: Path) -> bool:
    """Whether this process has `path` mmap'ed (i.e. dlopen'ed)."""
    return str(path.resolve()) in Path("/proc/self/maps").read_text()


# ---- the builds under test -------------------------------------------------------------------------

@dataclass(frozen=True)
class Built:
    kind: str         # synthetic | real
    build_dir: Path   # <build_dir>/<spec>/<arch>/manifest.json
    spec: str         # the spec the tests vendor
    other: str        # a second spec, built for the same archs (for the foreign manifest)
    archs: tuple[str, ...]


def _blob(tag: str, n: int) -> bytes:
    out = b""
    while len(out) < n:
        out += hashlib.sha256(f"{tag}:{len(out)}".encode()).digest()
    return b"\x7fELF" + out[: n - 4]


def _synthetic(build: Path, spec: str, family: str, archs: tuple[str, ...]) -> None:
    """A build directory shaped like the real one (manifest schema, file set); fake .so and cubins."""
    for arch in archs:
        d = build / spec / arch
        d.mkdir(parents=True)
        variants, cubins, written = [], [], []
        for i in range(2):
            vid = hashlib.sha256(f"{spec}/{arch}/{i}".encode()).hexdigest()[:12]
            name = f"kda2_{family}_{arch}_k64v64_{'kf' if i == 0 else 'vf'}_{vid}"
            cubin = _blob(name, 3000 + 17 * i)
            cubins.append(cubin)
            res = {f"kda2_{family}_{vid}": {"arch": arch, "registers": 96 + i, "smem": 0, "spill_loads": 0,
                                            "spill_stores": 0, "stack": 0, "barriers": 1}}
            files = {f"{name}.cubin": cubin, f"{name}.cu": f"// {name}\n".encode(),
                     f"{name}.plan.json": b"{}\n", f"{name}.why.json": b'{"reasons": []}\n',
                     f"{name}.resources.json": json.dumps(res).encode(), f"{name}.ptxas.log": b"ptxas info\n",
                     f"{name}.tir_before.tir": b"# tir\n", f"{name}.tir_after.tir": b"# tir\n"}
            for rel, data in files.items():
                (d / rel).write_bytes(data)
            written += files
            variants.append({"id": vid, "index": i, "name": name, "resources": res,
                             "config": {"arch": arch, "family": family, "k": 64, "v": 64,
                                        "state_layout": "k_first" if i == 0 else "v_first"},
                             "rules": ["0002@v1"] if arch == "sm_80" else [],
                             "flags": ["-Xptxas=-warn-spills"] if arch == "sm_80" else [],
                             "cubin": f"{name}.cubin", "plan": f"{name}.plan.json", "why": f"{name}.why.json",
                             "resources_path": f"{name}.resources.json"})
        lib = f"lib{spec}.{arch}.so"
        (d / lib).write_bytes(b"\x7fELF fake library\0" + b"\0" * 45 + cubins[0] + b"\0" * 3 + cubins[1] + b"end")
        written.append(lib)
        dispatch = [{"bucket": 64, "state_layout": v["config"]["state_layout"], "variant": v["id"], "index": v["index"],
                     "candidates": [v["id"]], "routed_by": "tune",
                     "tuned": {"gpu": "NVIDIA H200", "us": 10.5 + v["index"], "date": "2026-11-29T14:41:45+00:00",
                               "shape": {"N": 1, "T": 64, "H": 8}}} for v in variants]
        manifest = {"schema": 2, "abi_version": ABI_VERSION, "spec": spec, "arch": arch, "family": family, "k": 64, "v": 64,
                    "features": {"gate_modes": ["softplus"], "qk_l2norm": True, "beta_sigmoid": True,
                                 "gva_ratios": [1], "varlen": False, "state_dtype": "fp32",
                                 "state_layouts": ["k_first", "v_first"]},
                    "buckets": [64], "spec_digest": hashlib.sha256(spec.encode()).hexdigest(),
                    "toolchain": {"cxx": "g++ 12", "nvcc": "cuda_13.0", "schema": "2"},
                    "dispatch": dispatch, "variants": variants,
                    "files": {rel: hashlib.sha256((d / rel).read_bytes()).hexdigest() for rel in sorted(written)}}
        manifest["library"] = {"path": lib, "sha256": manifest["files"][lib]}
        (d / "manifest.json").write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n")


def _real(build: Path) -> Built:
    src = REPO / "build"
    specs = sorted({p.parent.parent.name for p in src.glob("*/*/manifest.json")})
    if not specs:
        pytest.fail(f"nothing built under {src}: run `scons` first (the README's first command)")
    spec = "kimi_linear_chunk" if "kimi_linear_chunk" in specs else specs[0]
    archs = tuple(sorted(p.parent.name for p in (src / spec).glob("*/manifest.json")))
    others = [s for s in specs if s != spec and all((src / s / a / "manifest.json").is_file() for a in archs)]
    if not others:
        pytest.fail(f"only {spec} is built for {archs} under {src}; build a second spec too (`scons`)")
    for s in (spec, others[0]):  # a private copy: the tests tamper with bundles, never with ./build
        shutil.copytree(src / s, build / s, ignore=shutil.ignore_patterns(".*"))
    return Built("real", build, spec, others[0], archs)


@pytest.fixture(scope="module", params=["synthetic", pytest.param("real", marks=pytest.mark.compile)])
def built(request, tmp_path_factory) -> Built:
    build = tmp_path_factory.mktemp(f"{request.param}-build")
    if request.param == "real":
        return _real(build)
    archs = ("sm_80", "sm_90a")
    _synthetic(build, "toy_chunk", "chunk", archs)
    _synthetic(build, "toy_recurrent", "recurrent", archs)
    return Built("synthetic", build, "toy_chunk", "toy_recurrent", archs)


def vend(built: Built, to: Path, *archs: str, spec: str | None = None) -> dict:
    return vendor_mod.vendor(spec or built.spec, to, archs=list(archs) or None, build_dir=built.build_dir,
                             rules_dir=RULES, log=lambda *_: None)


@pytest.fixture
def bundle_dir(built: Built, tmp_path: Path) -> Path:
    vend(built, tmp_path / "bundle")
    return tmp_path / "bundle"


# ---- vendor -> verify --------------------------------------------------------------------------------

def test_vendor_layout_and_verify_ok(built: Built, tmp_path: Path) -> None:
    to = tmp_path / "b"
    p = cli("vendor", built.spec, "--to", to, "--build-dir", built.build_dir, "--rules", RULES)
    assert p.returncode == 0, p.stderr
    assert "kda2 verify" in p.stdout and "kda2.load" in p.stdout
    libs = {a: f"lib{built.spec}.{a}.so" for a in built.archs}
    assert set(tree(to)) == {"bundle.json", "README.md", *(f"{built.spec}/{a}/{x}" for a in built.archs
                                                          for x in (libs[a], "manifest.json"))}
    index = json.loads((to / "bundle.json").read_text())
    assert index["kda2_version"] == kda2.__version__ and list(index["specs"]) == [built.spec]
    for arch in built.archs:
        src_raw = (built.build_dir / built.spec / arch / "manifest.json").read_bytes()
        src = json.loads(src_raw)
        m = json.loads((to / built.spec / arch / "manifest.json").read_text())
        entry = index["specs"][built.spec]["archs"][arch]
        assert entry["created_from_manifest_sha256"] == m["bundle"]["created_from"]["manifest_sha256"] \
            == hashlib.sha256(src_raw).hexdigest()
        # what the runtime reads is the build's; files lists the library alone
        for key in ("schema", "abi_version", "spec", "arch", "family", "k", "v", "features", "buckets",
                    "dispatch", "spec_digest", "toolchain", "library"):
            assert m[key] == src[key], key
        assert m["files"] == {libs[arch]: src["files"][libs[arch]]}
        assert (to / built.spec / arch / libs[arch]).read_bytes() == \
            (built.build_dir / built.spec / arch / libs[arch]).read_bytes()
        # variants keep config, flags, rules, resources; no path into the build directory survives
        for v, sv in zip(m["variants"], src["variants"]):
            assert {k: v[k] for k in ("id", "index", "name", "config", "flags", "rules", "resources")} == \
                {k: sv[k] for k in ("id", "index", "name", "config", "flags", "rules", "resources")}
            assert not {"cubin", "plan", "why", "resources_path"} & set(v), v
            k = m["bundle"]["kernels"][v["id"]]
            assert k["build_files"]["cubin"] == src["files"][sv["cubin"]] == k["embedded"]["sha256"]
            assert k["build_files"]["cu"] == src["files"][f"{sv['name']}.cu"]
        lock = json.loads((RULES / "rules.lock.json").read_text())
        used = {r.split("@")[0] for v in src["variants"] for r in v["rules"]}
        assert m["bundle"]["rules"] == {r: lock[r] for r in used}
        tuned = [d["tuned"] for d in src["dispatch"] if d.get("tuned")]
        assert m["bundle"]["tuned"]["routes"] == len(tuned)
        assert m["bundle"]["tuned"]["gpus"] == sorted({t["gpu"] for t in tuned})
    readme = (to / "README.md").read_text()
    assert "kda2.load(" in readme and "kda2 verify" in readme and built.spec in readme
    p = cli("verify", to)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"kda2 verify: {to}: ok: {built.spec}") and ", ".join(built.archs) in p.stdout
    assert "no GPU: code for" in p.stdout or " loads " in p.stdout


def test_revendor_is_byte_identical(built: Built, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    vend(built, a)
    first = tree(a)
    time.sleep(1.1)  # a timestamp anywhere would now differ
    vend(built, a)
    assert tree(a) == first
    copy = tmp_path / "elsewhere" / "build"  # the same build from another path: no path leaks in
    shutil.copytree(built.build_dir, copy)
    vendor_mod.vendor(built.spec, b, build_dir=copy, rules_dir=RULES, log=lambda *_: None)
    assert tree(b) == first
    # a subset replaces that arch only: the others stay, the same bytes
    vend(built, a, built.archs[-1])
    assert tree(a) == first
    # an arch removed by hand is dropped from bundle.json by the next vendor of the spec; the full set brings it back
    shutil.rmtree(a / built.spec / built.archs[0])
    lines: list[str] = []
    vendor_mod.vendor(built.spec, a, archs=[built.archs[-1]], build_dir=built.build_dir, rules_dir=RULES,
                      log=lines.append)
    assert bundle.verify(a)[built.spec]["archs"] == list(built.archs[1:])
    assert any(f"dropped {built.archs[0]} from bundle.json" in line for line in lines), lines
    vend(built, a)
    assert tree(a) == first


def test_vendoring_some_archs_keeps_the_others_and_deletes_nothing_it_did_not_write(built: Built,
                                                                                   tmp_path: Path) -> None:
    """`kda2 vendor SPEC --arch A` into a bundle holding SPEC for A and B: A is replaced, B stays (on disk and in
    bundle.json), and the bundle verifies. Anything in DIR/SPEC/ that vendor did not write (verify would refuse it)
    is refused before anything is written, naming it; a kept arch is checked first too."""
    to = tmp_path / "b"
    vend(built, to)
    first = tree(to)
    keep, redo = built.archs[0], built.archs[-1]
    args = ("--build-dir", built.build_dir, "--rules", RULES)
    p = cli("vendor", built.spec, "--arch", redo, "--to", to, *args)
    assert p.returncode == 0, p.stderr
    assert f"kept {keep}" in p.stdout and f"{built.spec} {', '.join(built.archs)}" in p.stdout, p.stdout
    assert tree(to) == first   # the same build: nothing else changed
    assert bundle.verify(to)[built.spec]["archs"] == list(built.archs)
    # a user's files under DIR/SPEC/: refused, named, all left as they were
    mine = [to / built.spec / "notes.txt", to / built.spec / redo / "mine.txt", to / built.spec / keep / "x.txt"]
    for f in mine:
        f.write_text("mine")
    before = tree(to)
    line = one_error_line(cli("vendor", built.spec, "--arch", redo, "--to", to, *args))
    assert "did not write" in line and "Nothing was written" in line, line
    for f in mine:
        assert str(f.relative_to(to)) in line, line
    assert tree(to) == before
    for f in mine:
        f.unlink()
    # a kept arch that would not verify: refused before writing, with the way out
    so = _truncate_so(to / built.spec / keep, json.loads((to / built.spec / keep / "manifest.json").read_text()))
    before = tree(to)
    line = one_error_line(cli("vendor", built.spec, "--arch", redo, "--to", to, *args))
    assert str(so) in line and f"--arch {keep}" in line, line
    assert tree(to) == before
    vend(built, to)   # vendoring every arch repairs it
    assert tree(to) == first


def test_vendoring_an_arch_of_another_family_than_the_kept_ones_is_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "build-a", tmp_path / "build-b"
    _synthetic(a, "toy_chunk", "chunk", ("sm_80", "sm_90a"))
    _synthetic(b, "toy_chunk", "recurrent", ("sm_90a",))
    to = tmp_path / "bundle"
    vendor_mod.vendor("toy_chunk", to, build_dir=a, rules_dir=RULES, log=lambda *_: None)
    first = tree(to)
    with pytest.raises(BundleError, match=r"family 'chunk' \(sm_80, which vendoring sm_90a keeps\), the build is "
                                          r"'recurrent'"):
        vendor_mod.vendor("toy_chunk", to, archs=["sm_90a"], build_dir=b, rules_dir=RULES, log=lambda *_: None)
    assert tree(to) == first


def _flip_embedded_cubin_byte(d: Path, m: dict) -> Path:
    so = d / m["library"]["path"]
    e = next(iter(m["bundle"]["kernels"].values()))["embedded"]
    data = bytearray(so.read_bytes())
    data[e["offset"] + e["size"] // 2] ^= 0x5A
    so.write_bytes(bytes(data))
    return so


def _truncate_so(d: Path, m: dict) -> Path:
    so = d / m["library"]["path"]
    so.write_bytes(so.read_bytes()[: so.stat().st_size // 2])
    return so


def _delete_so(d: Path, m: dict) -> Path:
    so = d / m["library"]["path"]
    so.unlink()
    return so


def _truncate_manifest(d: Path, m: dict) -> Path:
    mp = d / "manifest.json"
    mp.write_bytes(mp.read_bytes()[:200])
    return mp


def _edit_manifest(d: Path, m: dict) -> Path:  # still valid JSON and still self-consistent
    m["spec_digest"] = "0" * 64  # e.g. provenance rewritten
    (d / "manifest.json").write_text(bundle.dumps(m))
    return d / "manifest.json"


def test_revendor_clears_what_a_killed_vendor_of_the_spec_left(built: Built, tmp_path: Path) -> None:
    """A vendor killed mid-way leaves its stage (and the old tree, if killed between the swaps) beside the bundle;
    verify refuses the stray library. Vendoring that spec again removes what dead processes of it left, and only
    that: a stage of a live process, or of another spec, stays (and keeps the bundle refused)."""
    to = tmp_path / "b"
    vend(built, to)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = [to / f".{built.spec}.vendor-{dead.pid}" / built.archs[0] / "lib.so",
            to / f".{built.spec}.old-{dead.pid}" / built.archs[0] / "lib.so"]
    live = to / f".{built.spec}.vendor-{os.getppid()}" / "x"   # a running process's stage: kept
    other = to / f".{built.other}.vendor-{dead.pid}" / built.archs[0] / "lib.so"
    for f in (*left, other):
        f.parent.mkdir(parents=True)
        f.write_bytes(b"\x7fELF")
    live.parent.mkdir(parents=True)
    live.write_text("")
    with pytest.raises(bundle.BundleError, match="unlisted file"):
        bundle.verify(to)
    with pytest.raises(bundle.BundleError, match=re.escape(str(other))):
        vend(built, to)   # the spec's own leftovers are gone; another spec's still makes the bundle refused
    assert not any(f.parent.parent.exists() for f in left) and other.exists() and live.exists()
    shutil.rmtree(other.parent.parent)
    vend(built, to)
    bundle.verify(to)


def _stray_cubin(d: Path, m: dict) -> Path:  # e.g. what an interrupted vendor left beside the specs
    stray = d.parent.parent / ".kimi.vendor-1" / "sm_90a" / "extra.cubin"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"\x7fELF")
    return stray


def _stray_file(d: Path, m: dict) -> Path:  # anything unlisted inside an arch directory
    stray = d / "notes.txt"
    stray.write_text("not part of the bundle")
    return stray


def _symlink_so(d: Path, m: dict) -> Path:  # the same bytes, but outside the bundle: it no longer travels whole
    so = d / m["library"]["path"]
    outside = d.parents[2] / "elsewhere" / so.name
    outside.parent.mkdir(exist_ok=True)
    os.replace(so, outside)
    so.symlink_to(outside)
    return so


def _symlink_arch_dir(d: Path, m: dict) -> Path:  # a whole arch directory linked in from outside
    outside = d.parents[2] / "elsewhere" / d.name
    outside.parent.mkdir(exist_ok=True)
    os.replace(d, outside)
    d.symlink_to(outside, target_is_directory=True)
    return d


#: case -> (tamper, what verify's one line must say, whether kda2.load refuses it too)
TAMPER = {
    "cubin-byte-in-so": (_flip_embedded_cubin_byte, ["corrupt file", "the cubin of kernel", "sha256"], True),
    "truncated-so": (_truncate_so, ["corrupt file", "truncated"], True),
    "missing-so": (_delete_so, ["missing file"], True),
    "truncated-manifest": (_truncate_manifest, ["not valid JSON"], True),
    "edited-manifest": (_edit_manifest, ["edited or replaced after vendoring"], False),
    "stray-cubin": (_stray_cubin, ["unlisted file"], False),
    "stray-file": (_stray_file, ["unlisted file", "not in"], False),
    "symlinked-so": (_symlink_so, ["is a symbolic link", "elsewhere"], False),
    "symlinked-arch-dir": (_symlink_arch_dir, ["is a symbolic link", "elsewhere"], False),
}


@pytest.mark.parametrize("case", list(TAMPER))
def test_tampered_bundle_is_refused(built: Built, bundle_dir: Path, case: str) -> None:
    tamper, phrases, load_refuses = TAMPER[case]
    arch = built.archs[-1]
    d = bundle_dir / built.spec / arch
    m = json.loads((d / "manifest.json").read_text())
    so = d / m["library"]["path"]
    culprit = tamper(d, m)
    line = one_error_line(cli("verify", bundle_dir))
    assert str(culprit) in line, line
    for phrase in phrases:
        assert phrase in line, line
    if case == "cubin-byte-in-so":
        assert next(iter(m["bundle"]["kernels"].values()))["name"] in line
    with pytest.raises(BundleError):
        bundle.verify(bundle_dir)
    if load_refuses:
        with pytest.raises(ArtifactError, match=culprit.name):
            kda2.load(bundle_dir, arch=arch)
        assert not mapped(so), "a refused library must not be dlopen'ed"


def test_manifest_of_another_spec_is_refused(built: Built, tmp_path: Path) -> None:
    """The other spec's (valid, self-consistent) bundle manifest and library moved into this spec's arch dir."""
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    vend(built, mine)
    vend(built, theirs, spec=built.other)
    arch = built.archs[-1]
    d, o = mine / built.spec / arch, theirs / built.other / arch
    for f in o.iterdir():
        shutil.copy(f, d / f.name)
    (d / f"lib{built.spec}.{arch}.so").unlink()
    line = one_error_line(cli("verify", mine))
    assert f"{d / 'manifest.json'}: belongs to spec {built.other!r}" in line, line
    with pytest.raises(ArtifactError, match=f"belongs to spec {built.other!r}"):
        kda2.load(mine, arch=arch)
    assert not mapped(d / f"lib{built.other}.{arch}.so")


def test_gpu_check(built: Built, bundle_dir: Path, tmp_path: Path, monkeypatch) -> None:
    from kda2.runtime import device

    monkeypatch.setattr(device, "current_capability", lambda *_: (9, 0))
    best = "sm_90a" if "sm_90a" in built.archs else built.archs[0]
    assert vendor_mod.verify_bundle(bundle_dir).endswith(f"GPU 9.0 loads {built.spec} {best}")
    hopper = tmp_path / "hopper"
    vend(built, hopper, "sm_90a")  # Hopper-only code ...
    monkeypatch.setattr(device, "current_capability", lambda *_: (8, 6))  # ... on an Ampere part
    with pytest.raises(BundleError, match=r"no code for this GPU \(compute capability 8.6 runs sm_86, sm_80\)"):
        vendor_mod.verify_bundle(hopper)

    def no_gpu(*_):
        raise ArtifactError("no CUDA device is visible")

    monkeypatch.setattr(device, "current_capability", no_gpu)
    assert vendor_mod.verify_bundle(hopper).endswith("no GPU: code for sm_90a")


def test_two_specs_in_one_bundle(built: Built, tmp_path: Path) -> None:
    to = tmp_path / "b"
    vend(built, to)
    vend(built, to, spec=built.other)
    assert sorted(bundle.verify(to)) == sorted([built.spec, built.other])
    with pytest.raises(ArtifactError, match="bundles 2 specs"):
        kda2.load(to, arch=built.archs[0])
    vend(built, to, built.archs[0])  # re-vendoring one arch of one spec leaves the rest alone
    assert bundle.verify(to)[built.other]["archs"] == list(built.archs)
    assert bundle.verify(to)[built.spec]["archs"] == list(built.archs)


def test_vendor_and_verify_errors_are_one_line(built: Built, tmp_path: Path) -> None:
    args = ("--build-dir", built.build_dir, "--rules", RULES)
    line = one_error_line(cli("vendor", "nosuchspec", "--to", tmp_path / "x", *args))
    assert "no build of nosuchspec" in line and "`kda2 build nosuchspec`" in line
    # the every-candidate tree's hint builds that tree
    line = one_error_line(cli("vendor", "nosuchspec", "--to", tmp_path / "x", "--build-dir", "build/_candidates"))
    assert "`kda2 build --candidates all nosuchspec`" in line
    line = one_error_line(cli("vendor", built.spec, "--to", tmp_path / "x", "--arch", "sm_75", *args))
    assert "no build for sm_75" in line and "sm_75 is not an arch a spec may list (allowed: sm_80" in line, line
    line = one_error_line(cli("vendor", built.spec, "--to", tmp_path / "x", "--arch", "sm_86", *args))
    assert "add sm_86 to the spec's archs and rebuild" in line, line
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine")
    line = one_error_line(cli("vendor", built.spec, "--to", tmp_path / "home", *args))
    assert "not empty and holds no bundle.json" in line and (tmp_path / "home" / "notes.txt").exists()
    assert "no bundle.json" in one_error_line(cli("verify", tmp_path / "home"))
    # a corrupt build is not vendored
    bad = tmp_path / "bad-build"
    shutil.copytree(built.build_dir / built.spec, bad / built.spec)
    m = json.loads((bad / built.spec / built.archs[0] / "manifest.json").read_text())
    cubin = bad / built.spec / built.archs[0] / m["variants"][0]["cubin"]
    data = bytearray(cubin.read_bytes())
    data[-1] ^= 0xFF
    cubin.write_bytes(bytes(data))
    line = one_error_line(cli("vendor", built.spec, "--to", tmp_path / "y", "--build-dir", bad, "--rules", RULES))
    assert cubin.name in line and "sha256" in line and not (tmp_path / "y" / built.spec).exists()
    # the matched rules must be in the lock with the version the build used
    if any(v["rules"] for a in built.archs
           for v in json.loads((built.build_dir / built.spec / a / "manifest.json").read_text())["variants"]):
        rules = tmp_path / "rules"
        rules.mkdir()
        (rules / "rules.lock.json").write_text("{}")
        line = one_error_line(cli("vendor", built.spec, "--to", tmp_path / "z", *args[:2], "--rules", rules))
        assert "rules.lock.json has no entry" in line
    # verify pointed inside a bundle says where the root is
    to = tmp_path / "ok"
    vend(built, to)
    assert f"inside the bundle {to}" in one_error_line(cli("verify", to / built.spec))


def test_vendor_a_spec_file_vendors_the_build_of_its_name_field(built: Built, tmp_path: Path) -> None:
    """`kda2 vendor PATH.yaml` vendors the spec the file declares (`name:`), as `kda2 build PATH.yaml` builds it, not
    one named after the file; a spec path that does not exist, or a file that is no spec, is one line naming it."""
    args = ("--build-dir", built.build_dir, "--rules", RULES)
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(tiny_spec(built.spec, 64))
    p = cli("vendor", renamed, "--to", tmp_path / "b", *args)
    assert p.returncode == 0, p.stderr
    assert f"{renamed} is spec {built.spec!r} (its name: field" in p.stdout, p.stdout
    assert list(bundle.verify(tmp_path / "b")) == [built.spec]
    line = one_error_line(cli("vendor", tmp_path / "nonexist.yaml", "--to", tmp_path / "c", *args))
    assert f"{tmp_path / 'nonexist.yaml'}: no such spec file" in line and "no build of" not in line, line
    (tmp_path / "broken.yaml").write_text("name: [\n")
    line = one_error_line(cli("vendor", tmp_path / "broken.yaml", "--to", tmp_path / "c", *args))
    assert "broken.yaml" in line and "no build of" not in line, line
    assert not (tmp_path / "c").exists()


def test_vendor_to_a_file_is_one_line_error(built: Built, tmp_path: Path) -> None:
    """--to must be a directory: an existing file (or a file on its path) is named, and left as it was."""
    args = ("--build-dir", built.build_dir, "--rules", RULES)
    afile = tmp_path / "afile"
    afile.write_text("mine")
    for to in (afile, afile / "sub"):
        line = one_error_line(cli("vendor", built.spec, "--to", to, *args))
        assert f"{afile} is a file, not a directory" in line and "--to a directory" in line, line
        assert "Errno" not in line, line
    assert afile.read_text() == "mine" and sorted(tmp_path.iterdir()) == [afile]


def test_vendor_summary_names_a_load_call_that_loads(built: Built, tmp_path: Path) -> None:
    """The success line's kda2.load(...) calls each resolve to a library of the bundle: the bundle's directory for
    one spec; one spec directory each for several (kda2.load of such a bundle refuses: it bundles two specs)."""
    to = tmp_path / "b"
    arch = built.archs[-1]
    for specs in ([built.spec], [built.spec, built.other]):
        index = vend(built, to, spec=specs[-1])
        line = vendor_mod.summary(to, index)
        calls = re.findall(r"kda2\.load\('([^']+)'\)", line)
        assert len(calls) == len(specs) and f"kda2 verify {to}" in line, line
        got = {loader._resolve(Path(c), arch) for c in calls}   # where kda2.load looks (synthetic: cannot open)
        assert got == {(to / s / arch / "manifest.json").resolve() for s in specs}, line


@pytest.mark.parametrize("verb, phrases", [
    ("vendor", ["deployable bundle", "--to", "--arch", "byte-identical", "sha256", "kda2.load(DIR)", "kda2 verify"]),
    ("verify", ["sha256", "unlisted", "GPU", "CPU host", "exit 2", "kda2: error:"]),
])
def test_help(verb: str, phrases: list[str]) -> None:
    p = cli(verb, "--help")
    assert p.returncode == 0 and p.stdout.startswith(f"usage: kda2 {verb} "), p.stderr
    text = " ".join(p.stdout.split())
    for phrase in phrases:
        assert phrase in text, (verb, phrase, p.stdout)
    top = cli("--help").stdout
    assert "vendor" in top and "verify" in top


# ---- loading (real build only) -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def real(tmp_path_factory) -> Built:
    return _real(tmp_path_factory.mktemp("real-build"))


@pytest.mark.compile
def test_load_bundle_on_cpu(real: Built, tmp_path: Path) -> None:
    to = tmp_path / "bundle"
    vend(real, to)
    for arch in real.archs:
        d = to / real.spec / arch
        lib = kda2.load(to, arch=arch)
        assert kda2.load(to / real.spec, arch=arch) is lib and kda2.load(d) is lib
        assert (lib.spec, lib.arch) == (real.spec, arch) and lib.so_path == (d / f"lib{real.spec}.{arch}.so").resolve()
        assert mapped(lib.so_path)
        for entry in lib.dispatch:
            assert lib.select(entry["state_layout"] == "v_first", entry["bucket"], entry["min_chains"]) == entry["index"]
    # the loader also refuses a bundle manifest in the wrong <spec>/<arch> directory
    wrong = to / real.spec / "sm_00"
    shutil.copytree(to / real.spec / real.archs[0], wrong)
    with pytest.raises(ArtifactError, match=r"not to the directory .*/sm_00"):
        loader.load(wrong)


@pytest.mark.compile
def test_runtime_only_venv_loads_and_verifies_a_bundle(real: Built, runtime_venv: Path, tmp_path: Path) -> None:
    to = tmp_path / "bundle"
    vend(real, to)
    code = textwrap.dedent(f"""
        import importlib.util, json, sys
        import kda2
        from kda2.tools.cli import main
        root, spec, archs = sys.argv[1], sys.argv[2], sys.argv[3:]
        rc = main(["verify", root])
        try:
            kda2.runtime.device.current_capability()
            gpu = True
        except kda2.runtime.ArtifactError:
            gpu = False
        out = {{"rc": rc, "file": kda2.__file__, "libs": []}}
        if gpu:  # the arch chosen for this GPU
            lib = kda2.load(root)
            out["libs"].append([lib.spec, lib.arch, lib.family, len(lib.variants), str(lib.so_path)])
        for arch in archs:  # on a CPU host the arch must be named; any arch loads (no kernel runs)
            lib = kda2.load(root, arch=arch)
            assert kda2.load(root + "/" + spec, arch=arch) is lib
            out["libs"].append([lib.spec, lib.arch, lib.family, len(lib.variants), str(lib.so_path)])
        out["present"] = [m for m in {BUILD_ONLY!r} if importlib.util.find_spec(m) is not None]
        out["loaded"] = [m for m in {BUILD_ONLY!r} if m in sys.modules]
        print(json.dumps(out))
    """)
    p = subprocess.run([str(runtime_venv), "-c", code, str(to), real.spec, *real.archs], capture_output=True,
                       text=True, cwd="/", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    *verify_lines, last = p.stdout.splitlines()
    out = json.loads(last)
    assert out["rc"] == 0 and verify_lines[0].startswith(f"kda2 verify: {to}: ok: {real.spec}"), p.stdout
    assert "site-packages" in out["file"], "the venv must import the installed package, not the checkout"
    assert out["present"] == [] and out["loaded"] == [], out
    for arch in real.archs:
        m = json.loads((to / real.spec / arch / "manifest.json").read_text())
        assert [real.spec, arch, m["family"], len(m["variants"]),
                str((to / real.spec / arch / m["library"]["path"]).resolve())] in out["libs"]
    # the installed `kda2 verify` refuses a tampered copy with one line, and the runtime refuses to load it
    d = to / real.spec / real.archs[-1]
    _flip_embedded_cubin_byte(d, json.loads((d / "manifest.json").read_text()))
    p = subprocess.run([str(runtime_venv.parent / "kda2"), "verify", str(to)], capture_output=True, text=True,
                       cwd="/", timeout=120)
    assert "the cubin of kernel" in one_error_line(p)
    code = ("import sys, kda2\ntry:\n kda2.load(sys.argv[1], arch=sys.argv[2])\n"
            "except kda2.runtime.ArtifactError as e:\n print(e)\n")
    p = subprocess.run([str(runtime_venv), "-c", "import kda2.runtime\n" + code, str(to), real.archs[-1]],
                       capture_output=True, text=True, cwd="/", timeout=120)
    assert p.returncode == 0 and "corrupt artifact" in p.stdout and "sha256" in p.stdout, p.stdout + p.stderr


# ---- scons vendor ------------------------------------------------------------------------------------

TINY_SPEC = tiny_spec("tiny_vendor", 64)  # the CLI tests' smallest useful spec


@pytest.mark.compile
def test_scons_vendor_alias(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    root.mkdir()
    shutil.copy2(REPO / "SConstruct", root / "SConstruct")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "site_scons", root / "site_scons", ignore=ignore)
    shutil.copytree(RULES, root / "rules", ignore=ignore)
    (root / "kernel_specs").mkdir()
    (root / "kernel_specs" / "tiny_vendor.yaml").write_text(TINY_SPEC)
    e = _env()
    e["KDA2_CACHE_DIR"] = str(tmp_path / "cache")

    def scons(*args):
        return subprocess.run([sys.executable, "-m", "SCons", "-j2", *args], cwd=root, env=e, capture_output=True,
                              text=True, timeout=600)

    p = scons("vendor")
    assert p.returncode == 2 and "kda2: error: `scons vendor` needs VENDOR_TO=DIR" in p.stderr, p.stdout + p.stderr
    assert not (root / "build" / "tiny_vendor").exists(), "nothing is built when the vendor target is refused"
    to = tmp_path / "bundle"
    p = scons("vendor", f"VENDOR_TO={to}")  # builds the spec first, then vendors it
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert (root / "build" / "tiny_vendor" / "sm_90a" / "manifest.json").is_file()
    assert bundle.verify(to) == {"tiny_vendor": {"family": "recurrent", "archs": ["sm_90a"]}}
    first = tree(to)
    p = scons("vendor", f"VENDOR_TO={to}")  # up to date: vendors again, same bytes
    assert p.returncode == 0 and "kda2 vendor" in p.stdout, p.stdout + p.stderr
    assert tree(to) == first
    cli_to = tmp_path / "cli-bundle"  # the same function as `kda2 vendor`
    vendor_mod.vendor("tiny_vendor", cli_to, build_dir=root / "build", rules_dir=root / "rules", log=lambda *_: None)
    assert tree(cli_to) == first
    assert scons("-q").returncode == 0, "the vendor alias must not touch the default targets"


def test_load_takes_every_spelling_of_a_bundle_or_a_build_tree(built: Built, bundle_dir: Path, monkeypatch) -> None:
    """kda2.load: the bundle root, its bundle.json and its <spec> directory name one library; a build tree holding
    several specs is refused with their names and the call that loads one; a bare name that is neither a path nor
    a built spec lists the built specs."""
    arch = built.archs[-1]
    want = loader._resolve(bundle_dir, arch)   # where kda2.load looks (the synthetic libraries cannot be opened)
    assert want == (bundle_dir / built.spec / arch / "manifest.json").resolve()
    for spelling in (bundle_dir / bundle.INDEX, bundle_dir / built.spec):
        assert loader._resolve(spelling, arch) == want
    with pytest.raises(ArtifactError, match=rf"holds the builds of several specs \(.*{built.spec}.*\); load one"):
        kda2.load(built.build_dir)
    monkeypatch.setenv("KDA2_BUILD_DIR", str(built.build_dir))
    with pytest.raises(ArtifactError, match=rf"nosuchspec: no such path, nor a spec built under .*{built.spec}"):
        kda2.load("nosuchspec")


def test_vendoring_an_every_candidate_build_says_so(built: Built, tmp_path: Path) -> None:
    """Vendoring an every-candidate build (the tree `kda2 build --candidates all` writes, given as the build dir) ships
    every candidate, so it says how many kernels it ships and how many the dispatch routes."""
    arch = built.archs[-1]
    src = tmp_path / "b"
    shutil.copytree(built.build_dir, src)
    mpath = src / built.spec / arch / "manifest.json"
    m = json.loads(mpath.read_text())
    lines: list[str] = []
    vendor_mod.vendor(built.spec, tmp_path / "routed", build_dir=src, rules_dir=RULES, log=lines.append)
    assert not [ln for ln in lines if "every-candidate" in ln]
    m["candidates"] = "all"   # as an all-candidates build writes it (the manifest is not in its own files table)
    mpath.write_text(json.dumps(m))
    lines.clear()
    vendor_mod.vendor(built.spec, tmp_path / "all", build_dir=src, rules_dir=RULES, log=lines.append)
    routed = len({d["variant"] for d in m["dispatch"]})
    assert any(f"every-candidate build (CANDIDATES=all): the bundle ships its {len(m['variants'])} kernels, of which "
               f"the dispatch routes {routed}; the routed build" in ln for ln in lines), lines
