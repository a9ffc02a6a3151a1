"""Find, verify and load built libraries: `load(...)`, `default_library()`.

Layout produced by the build (all manifest paths are relative to the manifest's directory):
    build/<spec>/<arch>/manifest.json, lib<spec>.<arch>.so, <variant id>/kernel.cubin, ...
A bundle made by `kda2 vendor` (kda2.artifact.bundle) has the same shape under DIR/ with DIR/bundle.json:
    DIR/<spec>/<arch>/manifest.json, lib<spec>.<arch>.so (the cubins are embedded in the .so).
Every file listed in the manifest is checked against its sha256 before the .so is dlopen'ed, so a
half-copied or mixed-up deployment fails with the file's name instead of a wrong answer.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from kda2.artifact import bundle  # stdlib-only modules: safe for the runtime
from kda2.artifact.manifest import SCHEMA as MANIFEST_SCHEMA
from kda2.artifact.manifest import sha256_file
from kda2.runtime import abi
from kda2.runtime.device import arch_preference, current_capability, no_device_error
from kda2.runtime.errors import ArtifactError
from kda2.runtime.library import Library

MANIFEST = "manifest.json"
ENV_LIBRARY = "KDA2_LIBRARY"
ENV_BUILD_DIR = "KDA2_BUILD_DIR"

_lock = threading.Lock()
# resolved manifest path -> [manifest sha256, library, whether its files were verified]
_cache: dict[Path, list] = {}
_default: Library | None = None  # the default recurrent library (read directly by the decode hot path)
_defaults: dict[str, Library] = {}  # family -> default library

_HOW_TO_BUILD = ("build it from the repository root with `scons` (or `kda2 build`), "
                 "or point to another build with KDA2_LIBRARY=<path to manifest.json> (one library) or "
                 "KDA2_BUILD_DIR=<build directory> (where libraries are looked for; default ./build)")


def _fix(path: Path, for_a_build: str) -> str:
    """How to repair a missing or corrupt `path` (a manifest, a file it lists, or a build directory):
    `for_a_build` (rebuild) for a build directory; for a bundle made by `kda2 vendor` (DIR/bundle.json, at
    most three levels up) re-vendoring it or copying it again, `kda2 verify DIR` naming what is wrong."""
    root = next((d for d in (path, *path.parents[:3]) if (d / bundle.INDEX).is_file()), None)
    if root is None:
        return for_a_build
    rel = path.relative_to(root).parts
    spec = rel[0] if rel and bundle.plain_name(rel[0]) else "SPEC"
    return (f"{root} is a bundle made by `kda2 vendor`: `kda2 verify {root}` lists what is wrong; re-vendor it from "
            f"its build (`kda2 vendor {spec} --to {root}`) or copy the whole bundle again from where it came from")


def _gpu_archs(load_call: str) -> list[str]:
    """Built archs that run on the current GPU, best first; without a visible GPU, the ArtifactError of
    device.no_device_error with `load_call` (a kda2.load(..., arch=...) of this very build) as its advice."""
    try:
        return arch_preference(current_capability())
    except ArtifactError as exc:
        if exc.__cause__ is None:
            raise
        raise no_device_error(exc.__cause__, load_call) from exc.__cause__


def load(manifest_or_spec_dir: str | os.PathLike, arch: str | None = None, verify: bool = True) -> Library:
    """Load a built library.

    `manifest_or_spec_dir` is a manifest.json, a `build/<spec>/<arch>` directory, a `build/<spec>`
    directory (the arch is then chosen for the current GPU, or given by `arch`), a bundle made by
    `kda2 vendor` (its directory, holding bundle.json, when it bundles one spec; or its `<spec>` or
    `<spec>/<arch>` directory), or a bare spec name looked up under `$KDA2_BUILD_DIR` (default ./build).
    `arch`: a build arch such as "sm_90a" or "sm_80" (default: the best one built for the current GPU).
    `verify` checks every file's sha256 (also on a cached library loaded before without it).
    Libraries are cached per manifest path: loading twice returns the same object. Raises kda2.runtime.errors.ArtifactError
    (a RuntimeError) naming the file at fault and what to do: no build, a build for
    another arch or GPU, a corrupt or missing file, a manifest of another schema.
    """
    manifest_path = _resolve(Path(manifest_or_spec_dir), arch)
    raw = _read_bytes(manifest_path, what="manifest")
    digest = hashlib.sha256(raw).hexdigest()
    with _lock:
        hit = _cache.get(manifest_path)
        if hit is not None:
            if hit[0] != digest:
                # dlopen of the same path returns the already-mapped copy; a rebuilt .so cannot be reloaded.
                raise ArtifactError(f"{manifest_path} changed since it was loaded in this process; "
                                    "restart the process to load the rebuilt library")
            _check_arch(manifest_path, hit[1].arch, arch)   # a cached library answers the same question
            if verify and not hit[2]:  # loaded with verify=False before: asked now, checked now
                verify_files(manifest_path, _parse(manifest_path, raw))
                hit[2] = True
            return hit[1]
        manifest = _parse(manifest_path, raw)
        if "bundle" in manifest and bundle.bundle_root_of(manifest_path) is not None:
            try:  # a bundle's manifest must be the one of its <spec>/<arch> directory
                bundle.check_placement(manifest_path, manifest)
            except bundle.BundleError as exc:
                raise ArtifactError(str(exc)) from exc
        _check_arch(manifest_path, manifest.get("arch"), arch)
        if verify:
            verify_files(manifest_path, manifest)
        so_path = _member(manifest_path, manifest["library"]["path"])
        if not so_path.is_file():
            raise ArtifactError(f"missing library {so_path} (listed in {manifest_path}); "
                                f"{_fix(manifest_path, _HOW_TO_BUILD)}")
        lib = _open_library(manifest_path, manifest, so_path)
        _cache[manifest_path] = [digest, lib, verify]
        return lib


def _check_arch(manifest_path: Path, built: Any, asked: str | None) -> None:
    if asked is not None and built != asked:
        raise ArtifactError(f"{manifest_path}: built for arch {built!r}, not the requested {asked!r}")


def verify_files(manifest_path: Path, manifest: dict[str, Any]) -> None:
    """Check each file of `manifest['files']` exists and matches its sha256; raise on the first that doesn't."""
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise ArtifactError(f"{manifest_path}: no 'files' table to verify against; "
                            f"{_fix(manifest_path, f'rebuild ({_HOW_TO_BUILD})')}")
    lib_rel = manifest["library"]["path"]
    if lib_rel not in files:
        raise ArtifactError(f"{manifest_path}: library {lib_rel!r} is not listed under 'files'")
    if manifest["library"].get("sha256") not in (None, files[lib_rel]):
        raise ArtifactError(f"{manifest_path}: library.sha256 disagrees with files[{lib_rel!r}]")
    for rel, expected in sorted(files.items()):
        path = _member(manifest_path, rel)
        if not path.is_file():
            raise ArtifactError(f"missing artifact {path} (listed in {manifest_path}); "
                                f"{_fix(manifest_path, _HOW_TO_BUILD)}")
        actual = sha256_file(path)
        if actual != expected:
            raise ArtifactError(f"corrupt artifact {path}: sha256 {actual}, manifest {manifest_path} expects "
                                f"{expected}; {_fix(manifest_path, f'rebuild it ({_HOW_TO_BUILD})')}")


def default_library(family: str = "recurrent", k: int | None = None, v: int | None = None) -> Library:
    """The library of `family` used when `library=` is not passed (cached after the first call).

    $KDA2_LIBRARY (a manifest path or directory) wins, and must be of that family; otherwise the one
    spec of that family under $KDA2_BUILD_DIR (default ./build) that has a build for the current GPU,
    or, where several are built (one per head-dim pair), the one built for head dims (k, v).
    fused_recurrent_kda uses family "recurrent", chunk_kda family "chunk".
    """
    global _default
    lib = _defaults.get(family)
    if lib is not None:
        return lib
    if k is not None and (family, k, v) in _defaults:
        return _defaults[(family, k, v)]
    env = os.environ.get(ENV_LIBRARY)
    if env:
        lib = load(env)
        if lib.family != family:
            raise ArtifactError(f"{ENV_LIBRARY}={env} is a {lib.family} library (spec {lib.spec}), but this call "
                                f"needs a {family} library; pass library=kda2.load(<{family} build>) to the call, "
                                f"or point {ENV_LIBRARY} at a {family} build")
    else:
        best = discover(family=family)
        if len(best) > 1:
            fits = [p for p in best if k is not None and _dims(p) == (k, v)]
            if len(fits) != 1:
                listing = ", ".join(f"{p} (K, V = {_dims(p)})" for p in best)
                which = (f"more than one {family} library fits this GPU" if k is None or fits else
                         f"no {family} library fits this GPU and head dims K={k}, V={v}")
                raise ArtifactError(f"{which}: {listing}; "
                                    f"pass library=kda2.runtime.load(path) or set {ENV_LIBRARY}=<manifest.json>")
            lib = load(fits[0])
            _defaults[(family, k, v)] = lib
            return lib
        lib = load(best[0])
    _defaults[family] = lib
    if family == "recurrent":
        _default = lib
    return lib


def built_head_dims(family: str = "recurrent") -> str:
    """The (K, V) of every built library of `family` under $KDA2_BUILD_DIR with the spec and archs that build it,
    for error messages: `K=64 V=64 (small_head_recurrent: sm_90a)`."""
    try:
        found = [p for p in find_manifests() if _family(p) == family]
    except (OSError, ValueError):
        found = []
    by_dims: dict[tuple[int, int], dict[str, list[str]]] = {}
    for p in found:
        by_dims.setdefault(_dims(p), {}).setdefault(p.parent.parent.name, []).append(p.parent.name)
    return ", ".join(f"K={k} V={v} (" + "; ".join(f"{spec}: {', '.join(sorted(archs))}"
                                                  for spec, archs in sorted(specs.items())) + ")"
                     for (k, v), specs in sorted(by_dims.items())) or "none found under " + str(build_dir())


def _dims(manifest_path: Path) -> tuple[int, int]:
    try:
        m = json.loads(manifest_path.read_bytes())
        return int(m["k"]), int(m["v"])
    except (OSError, ValueError, KeyError, TypeError):
        return (0, 0)


def build_dir() -> Path:
    return Path(os.environ.get(ENV_BUILD_DIR) or "build")


def find_manifests(root: Path | None = None) -> list[Path]:
    """Every build/<spec>/<arch>/manifest.json under `root` (default build_dir())."""
    root = build_dir() if root is None else root
    return sorted(root.glob(f"*/*/{MANIFEST}"))


def discover(root: Path | None = None, family: str = "recurrent") -> list[Path]:
    """One manifest per built spec of `family` under `root` (default build_dir()): the best arch for this GPU."""
    root = build_dir() if root is None else root
    found = [p for p in find_manifests(root) if _family(p) == family]
    if not found:
        raise ArtifactError(f"no built {family} library under {root.resolve()} (looked for "
                            f"<spec>/<arch>/{MANIFEST} with family {family!r}); {_fix(root, _HOW_TO_BUILD)}")
    example = [p for p in found if p.parent.parent == found[0].parent.parent][-1]  # first spec, last arch
    built = ", ".join(f"{p.parent.parent.name}/{p.parent.name}" for p in found)
    prefs = _gpu_archs(f"lib = kda2.load('{example.parent.parent}', arch='{example.parent.name}') "
                       f"(built {family} libraries: {built})")
    best: dict[str, Path] = {}
    for p in found:  # per spec, the most preferred arch that was built
        spec, a = p.parent.parent.name, p.parent.name
        if a in prefs and (spec not in best or prefs.index(a) < prefs.index(best[spec].parent.name)):
            best[spec] = p
    if not best:
        raise ArtifactError(f"no build under {root.resolve()} runs on this GPU (archs it can run: {prefs}); "
                            f"found: {', '.join(str(p) for p in found)}")
    return [best[s] for s in sorted(best)]


def _discover(family: str = "recurrent") -> Path:
    best = discover(family=family)
    if len(best) > 1:
        listing = ", ".join(str(p) for p in best)
        raise ArtifactError(f"more than one {family} library fits this GPU: {listing}; "
                            f"pass library=kda2.runtime.load(path) or set {ENV_LIBRARY}=<manifest.json>")
    return best[0]


def _resolve(path: Path, arch: str | None) -> Path:
    """Turn any accepted spelling of a build into the manifest path (not yet read)."""
    if not path.exists() and len(path.parts) == 1:  # a bare spec name
        if not (build_dir() / path).exists():
            specs = sorted({p.parent.parent.name for p in find_manifests()})
            raise ArtifactError(f"{path}: no such path, nor a spec built under {build_dir().resolve()} (built: "
                                f"{', '.join(specs) or 'none'}); {_HOW_TO_BUILD}")
        path = build_dir() / path
    if path.is_file() and path.name == bundle.INDEX:   # <bundle>/bundle.json: the bundle itself
        path = path.parent
    if path.is_file():
        return path.resolve()
    if (path / MANIFEST).is_file():
        return (path / MANIFEST).resolve()
    if (path / bundle.INDEX).is_file():  # a bundle (kda2 vendor): its one spec's directory
        try:
            path = bundle.spec_dir(path)
        except bundle.BundleError as exc:
            raise ArtifactError(str(exc)) from exc
    if path.is_dir():
        archs = sorted(p.parent.name for p in path.glob(f"*/{MANIFEST}"))
        if not archs:
            specs = sorted({p.parent.parent.name for p in find_manifests(path)})
            if specs:   # a build tree: name the spec
                raise ArtifactError(f"{path} holds the builds of several specs ({', '.join(specs)}); load one: "
                                    f"kda2.load('{path / specs[0]}')")
            raise ArtifactError(f"no {MANIFEST} in {path} or its arch subdirectories; {_fix(path, _HOW_TO_BUILD)}")
        if arch is not None:
            if arch not in archs:
                raise ArtifactError(f"{path} has no build for {arch} (built: {', '.join(archs)}); "
                                    f"{add_arch_advice(arch)}")
            return (path / arch / MANIFEST).resolve()
        prefs = _gpu_archs(f"lib = kda2.load('{path}', arch='{archs[-1]}') (built: {', '.join(archs)})")
        for a in prefs:
            if a in archs:
                return (path / a / MANIFEST).resolve()
        raise ArtifactError(f"{path}: built archs {archs} cannot run on this GPU (it runs {prefs}); "
                            "add one to the spec's archs, or pass arch= to force one")
    raise ArtifactError(f"missing manifest: {path} does not exist; {_fix(path, _HOW_TO_BUILD)}")


def add_arch_advice(arch: str) -> str:
    """What to do about a missing build for `arch`: add it to the spec's archs, where a spec may list it."""
    from kda2.plan.hardware import ARCHS  # constants only: safe for the runtime

    if arch in ARCHS:
        return f"add {arch} to the spec's archs and rebuild"
    return f"{arch} is not an arch a spec may list (allowed: {', '.join(ARCHS)})"


def _parse(manifest_path: Path, raw: bytes) -> dict[str, Any]:
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise ArtifactError(f"{manifest_path}: not valid JSON ({exc}); "
                            f"{_fix(manifest_path, f'rebuild ({_HOW_TO_BUILD})')}") from exc
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{manifest_path}: expected a JSON object")
    if manifest.get("schema") != MANIFEST_SCHEMA:
        raise ArtifactError(f"{manifest_path}: manifest schema {manifest.get('schema')!r}, this runtime reads "
                            f"schema {MANIFEST_SCHEMA}; rebuild with this kda2 or upgrade the runtime")
    if manifest.get("abi_version") != abi.ABI_VERSION:
        raise ArtifactError(f"{manifest_path}: abi_version {manifest.get('abi_version')!r}, this runtime speaks "
                            f"ABI {abi.ABI_VERSION}; rebuild with this kda2 or use the kda2 that built it")
    if not isinstance(manifest.get("library"), dict) or "path" not in manifest["library"]:
        raise ArtifactError(f"{manifest_path}: field 'library.path' is missing")
    return manifest


def _member(manifest_path: Path, rel: str) -> Path:
    """A manifest-relative path, refused if it would escape the manifest's directory."""
    root = manifest_path.parent
    path = (root / rel).resolve()
    if os.path.isabs(rel) or root.resolve() not in (path, *path.parents):
        raise ArtifactError(f"{manifest_path}: path {rel!r} leaves the build directory")
    return path


def _family(manifest_path: Path) -> str | None:
    try:
        return json.loads(manifest_path.read_bytes()).get("family")
    except (OSError, ValueError):
        return None


def _read_bytes(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise ArtifactError(f"missing {what} {path}; {_fix(path, _HOW_TO_BUILD)}") from exc


def _open_library(manifest_path: Path, manifest: dict[str, Any], so_path: Path) -> Library:
    """dlopen the .so; if it needs libcudart and the system loader cannot find it, preload and retry.

    Libraries that link libcudart.so.13 dynamically find it, on the GPU host, only in a pip wheel
    (nvidia-cuda-runtime) that the system loader does not search. cuda.pathfinder maps that copy; the
    .so's DT_NEEDED entry then resolves to it by soname. (A library that talks to the driver API
    through dlopen("libcuda.so.1") needs nothing here.)
    """
    try:
        return Library(manifest_path, manifest, so_path)
    except OSError as first:
        if "cudart" not in str(first):
            raise ArtifactError(f"cannot load {so_path}: {first}") from first
        try:
            from cuda import pathfinder

            pathfinder.load_nvidia_dynamic_lib("cudart")
        except Exception as exc:  # noqa: BLE001 - DynamicLibNotFoundError and friends
            raise ArtifactError(
                f"cannot load {so_path}: it needs libcudart, which neither the system loader nor "
                f"cuda.pathfinder found ({type(exc).__name__}: {exc}); install nvidia-cuda-runtime (pip) or "
                "add the CUDA toolkit's lib directory to LD_LIBRARY_PATH") from first
        try:
            return Library(manifest_path, manifest, so_path)
        except OSError as exc:
            raise ArtifactError(f"cannot load {so_path} even with cudart preloaded: {exc}") from exc


def clear_cache() -> None:
    """Forget cached Library objects (tests). The .so files stay mapped: dlclose is never safe here."""
    global _default
    with _lock:
        _cache.clear()
        _defaults.clear()
        _default = None
