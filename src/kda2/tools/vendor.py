"""`kda2 vendor` (and `scons vendor VENDOR_TO=DIR`): copy what the runtime needs of a built spec into a
deployable bundle; `kda2 verify`: check one. Layout, schema and the checks: `kda2.artifact.bundle`.

Vendoring reads `<build dir>/<spec>/<arch>/manifest.json`, checks every file it lists against its sha256,
and writes `DIR/<spec>/<arch>/{lib<spec>.<arch>.so, manifest.json}`, `DIR/bundle.json` and `DIR/README.md`.
Only the archs being vendored are replaced: the spec's other archs in DIR stay (checked first, and kept in
bundle.json; one whose directory was removed is dropped from it), and so do other specs. Each new arch is
written beside the bundle under a temporary name and renamed into place. Vendoring deletes nothing it did not
write: when DIR/<spec>/ holds anything bundle.json does not account for (which `kda2 verify` would refuse
anyway), it refuses before writing, naming it. The result is verified before returning.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

import kda2
from kda2.artifact import atomic, bundle
from kda2.artifact.bundle import INDEX, MANIFEST, README, BundleError
from kda2.artifact.manifest import DEFAULT_BUILD_DIRS, SCHEMA as MANIFEST_SCHEMA

RULES_LOCK = "rules.lock.json"


def spec_name(spec: str) -> str:
    """A spec name, or the path of a spec YAML: then the spec's `name:` field, which `kda2 build PATH.yaml` builds
    it under whatever the file is called."""
    if not spec.endswith((".yaml", ".yml")):
        if not bundle.plain_name(spec):
            raise BundleError(f"{spec!r} is not a spec name (e.g. kimi_linear_chunk) or a spec YAML path")
        return spec
    path = Path(spec).expanduser()
    if not path.is_file():
        raise BundleError(f"{spec}: no such spec file; give the path of a spec YAML, or a spec name (e.g. "
                          "kimi_linear_chunk)")
    try:  # the build extra (yaml, pydantic): only a spec file needs it, vendoring a spec by name does not
        from kda2.spec.model import SpecError, load_spec
    except ModuleNotFoundError as e:
        raise BundleError(f"{spec}: reading a spec file needs the build extra (no module {e.name!r} here: pip install "
                          "'kda2[build]'); or give the spec's name (its name: field)") from None
    try:
        return load_spec(path).name
    except SpecError as e:
        raise BundleError(str(e)) from None


def vendor(spec: str, to: str | os.PathLike, archs: Sequence[str] | None = None,
           build_dir: str | os.PathLike = "build", rules_dir: str | os.PathLike = "rules",
           log=print) -> dict[str, Any]:
    """Bundle the build of `spec` (every built arch, or `archs`) into `to`; return the bundle's index."""
    name = spec_name(spec)
    if spec.endswith((".yaml", ".yml")) and Path(spec).stem != name:
        log(f"kda2 vendor: {spec} is spec {name!r} (its name: field, not its file name): vendoring the build "
            f"{Path(build_dir) / name}")
    src = Path(build_dir) / name
    built = sorted(p.parent.name for p in src.glob(f"*/{MANIFEST}"))
    if not built:
        every = Path(build_dir).resolve() == Path(DEFAULT_BUILD_DIRS["all"]).resolve()
        raise BundleError(f"no build of {name} under {Path(build_dir).resolve()} (looked for {src}/<arch>/{MANIFEST}); "
                          f"build it with `kda2 build {'--candidates all ' if every else ''}{name}`, or pass --build-dir")
    archs = list(dict.fromkeys(archs)) if archs else built
    missing = [a for a in archs if a not in built]
    if missing:
        from kda2.runtime.loader import add_arch_advice

        raise BundleError(f"{src}: no build for {', '.join(missing)} (built: {', '.join(built)}); "
                          f"{'; '.join(add_arch_advice(a) for a in missing)}; or vendor another --arch")
    to = Path(to)
    previous = _previous_index(to)
    kept, dropped = _kept_archs(to, name, previous, archs)
    rules_lock = _RulesLock(Path(rules_dir))

    made: dict[str, tuple[bytes, dict[str, Any], str]] = {}  # arch -> (library bytes, bundle manifest, source sha)
    family = None
    for arch in sorted(archs):
        mpath = src / arch / MANIFEST
        raw = mpath.read_bytes()
        source = _source_manifest(mpath, raw, name, arch)
        family = family or source["family"]
        lib_rel = source["library"]["path"]
        library = _read_listed(mpath, src / arch, lib_rel)
        build_files = {rel: _read_listed(mpath, src / arch, rel) for rel in source["files"] if rel != lib_rel}
        rules = {}
        for v in source["variants"]:
            for ref in v.get("rules", []):
                rid, version = bundle.parse_rule_ref(ref)
                rules[rid] = rules_lock.get(rid, version, f"{mpath} (variant {v['id']})")
        m = bundle.make_manifest(source, source_sha256=bundle.sha256_bytes(raw), library=library,
                                 build_files=build_files, rules=rules, kda2_version=kda2.__version__)
        made[arch] = (library, m, bundle.sha256_bytes(raw))
        if source.get("candidates") == "all":   # a tuning build (build/_candidates, or BUILD_DIR= of one) given as the source
            routed = {d["variant"] for d in source.get("dispatch", [])}
            log(f"kda2 vendor: note: {mpath} is an every-candidate build (CANDIDATES=all): the bundle ships its "
                f"{len(source['variants'])} kernels, of which the dispatch routes {len(routed)}; the routed build "
                f"(`kda2 build {name}`, into {DEFAULT_BUILD_DIRS['routed']}/) ships only those")
    old_family = (previous or {}).get("specs", {}).get(name, {}).get("family")
    if kept and old_family != family:
        raise BundleError(f"{to / INDEX} holds {name} as family {old_family!r} ({', '.join(sorted(kept))}, which "
                          f"vendoring {', '.join(sorted(made))} keeps), the build is {family!r}: vendor those archs "
                          f"too (--arch), or remove their directories under {to / name} first")

    # write the archs beside the old ones, then swap each in: a killed vendor leaves the old archs (and its stage,
    # which verify refuses as unlisted until this spec is vendored again: its stages from dead processes go here)
    to.mkdir(parents=True, exist_ok=True)
    for left in sorted([*to.glob(f".{name}.vendor-*"), *to.glob(f".{name}.old-*")]):
        pid = left.name.rsplit("-", 1)[1]
        if pid.isdigit() and int(pid) != os.getpid() and not _running(int(pid)):
            shutil.rmtree(left, ignore_errors=True)
    stage = to / f".{name}.vendor-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    entries = dict(kept)
    try:
        for arch, (library, m, source_sha) in made.items():
            d = stage / arch
            d.mkdir(parents=True)
            lib_rel = m["library"]["path"]
            (d / lib_rel).write_bytes(library)
            text = bundle.dumps(m)
            (d / MANIFEST).write_text(text, encoding="utf-8", newline="\n")
            entries[arch] = {"library": lib_rel, "library_sha256": m["library"]["sha256"],
                             "manifest_sha256": bundle.sha256_bytes(text.encode()),
                             "created_from_manifest_sha256": source_sha}
            log(f"kda2 vendor: {name}/{arch}: {lib_rel} ({len(library)} B, {len(m['variants'])} kernels embedded), "
                f"{MANIFEST} ({len(text)} B)")
        dest = to / name
        old = to / f".{name}.old-{os.getpid()}"
        shutil.rmtree(old, ignore_errors=True)
        dest.mkdir(exist_ok=True)
        for arch in made:  # only what an earlier vendor wrote is moved aside (checked by _kept_archs)
            if (dest / arch).exists():
                old.mkdir(exist_ok=True)
                os.replace(dest / arch, old / arch)
            os.replace(stage / arch, dest / arch)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if kept:
        log(f"kda2 vendor: {name}: kept {', '.join(sorted(kept))} (in the bundle, not vendored this time)")
    if dropped:
        log(f"kda2 vendor: {name}: dropped {', '.join(dropped)} from {INDEX} (listed, but {to / name}/<arch> was "
            "removed)")
    index = bundle.make_index(previous, name, family, entries, kda2.__version__)
    atomic.write_text(to / INDEX, bundle.dumps(index))
    atomic.write_text(to / README, bundle.readme(index))
    bundle.verify(to)
    return index


def summary(to: str | os.PathLike, index: dict[str, Any]) -> str:
    """`kda2 vendor`'s last line: what the bundle holds, and the kda2.load call(s) that load it (the bundle's
    directory for one spec; for several, kda2.load(DIR) refuses and each spec's directory is loaded instead)."""
    specs = index["specs"]
    held = "; ".join(f"{s} {', '.join(e['archs'])}" for s, e in specs.items())
    if len(specs) == 1:
        load = f"it with kda2.load({str(to)!r})"
    else:
        load = "one spec with " + " or ".join(f"kda2.load({os.path.join(str(to), s)!r})" for s in specs) + \
            f" (or set KDA2_BUILD_DIR={to})"
    return f"kda2 vendor: {to}: {held}; load {load}, check it with `kda2 verify {to}`"


def _running(pid: int) -> bool:
    """Whether process `pid` exists (on this host: a bundle's stage is written by a local vendor)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # exists, owned by another user
        pass
    return True


def verify_bundle(root: str | os.PathLike) -> str:
    """`kda2 verify`: the whole bundle (kda2.artifact.bundle.verify), then that it has code for this host's
    GPU when one is visible. Returns the summary line; raises BundleError. Runtime-only imports."""
    from kda2.runtime.device import arch_preference, current_capability
    from kda2.runtime.errors import ArtifactError

    root = Path(root)
    summary = bundle.verify(root)
    specs = "; ".join(f"{s} ({e['family']}) {', '.join(e['archs'])}" for s, e in summary.items())
    try:
        cap = current_capability()
    except ArtifactError:
        archs = sorted({a for e in summary.values() for a in e["archs"]})
        return f"kda2 verify: {root}: ok: {specs}; no GPU: code for {', '.join(archs)}"
    prefs = arch_preference(cap)
    chosen = []
    for s, e in summary.items():
        runnable = [a for a in prefs if a in e["archs"]]
        if not runnable:
            raise BundleError(f"{root}: no code for this GPU (compute capability {cap[0]}.{cap[1]} runs "
                              f"{', '.join(prefs) or 'none of the archs kda2 builds'}); spec {s} has "
                              f"{', '.join(e['archs'])}: vendor a build for it")
        chosen.append(f"{s} {runnable[0]}")
    return f"kda2 verify: {root}: ok: {specs}; GPU {cap[0]}.{cap[1]} loads {', '.join(chosen)}"


def declare_scons(env, manifests: Sequence, to: str | None, archs: Sequence[str] | None = None,
                  build_dir: str = "build", rules_dir: str = "rules"):
    """SConstruct's `vendor` alias (`scons vendor VENDOR_TO=DIR [VENDOR_ARCHS=a,b]`): a Command, built after
    `manifests`, that vendors each spec they belong to (its archs declared in this run, or `archs`) into `to`.
    Always runs (vendoring is cheap and idempotent), never cached, never cleaned, its target never deleted
    first (that would drop bundle.json from a bundle being updated)."""
    from SCons.Action import Action
    from SCons.Script import Exit

    if not to:
        sys.stderr.write("kda2: error: `scons vendor` needs VENDOR_TO=DIR (the bundle directory to write)\n")
        Exit(2)
    specs: dict[str, list[str]] = {}
    for m in manifests:
        p = Path(str(m))
        specs.setdefault(p.parent.parent.name, []).append(p.parent.name)
    opts = {"to": str(to), "build_dir": str(build_dir), "rules_dir": str(rules_dir),
            "specs": {s: list(archs) if archs else sorted(a) for s, a in sorted(specs.items())}}
    node = env.Command(str(Path(to) / INDEX), list(manifests),
                       Action(scons_action, lambda target, source, env: f"kda2 vendor    {to}"), KDA2_VENDOR=opts)
    env.AlwaysBuild(node)
    env.Precious(node)
    env.NoCache(node)
    env.NoClean(node)
    return env.Alias("vendor", node)


def scons_action(target, source, env) -> int:
    """The `vendor` alias of SConstruct: vendor every spec it built into $VENDOR_TO (after building them)."""
    opts = env["KDA2_VENDOR"]
    try:
        for spec, archs in opts["specs"].items():
            vendor(spec, opts["to"], archs=archs, build_dir=opts["build_dir"], rules_dir=opts["rules_dir"])
        print(f"kda2 vendor: {opts['to']}: check it with `kda2 verify {opts['to']}`")
    except (BundleError, OSError) as e:
        sys.stderr.write(f"kda2: error: {e}\n")
        return 2
    return 0


# ---- helpers -----------------------------------------------------------------------------------------

def _previous_index(to: Path) -> dict[str, Any] | None:
    # the first existing path of `to` and its parents must be a directory (mkdir would say only "File exists")
    there = next((p for p in (to, *to.parents) if p.exists() or p.is_symlink()), None)
    if there is not None and not there.is_dir():
        raise BundleError(f"{there} is a file, not a directory{'' if there == to else f' (in --to {to})'}: vendor "
                          "--to a directory (a new or empty one, or a bundle an earlier `kda2 vendor` made)")
    if (to / INDEX).is_file():
        return bundle.read_index(to)
    if to.is_dir() and any(not p.name.startswith(".") for p in to.iterdir()):
        raise BundleError(f"{to} is not empty and holds no {INDEX}: not a kda2 bundle to update; vendor into a "
                          "new or empty directory")
    return None


def _kept_archs(to: Path, name: str, previous: dict[str, Any] | None,
                archs: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """(The index entries of the spec's archs in the bundle that vendoring `archs` keeps, checked as `kda2 verify`
    checks them; the listed archs whose directory is gone, which bundle.json drops). Refuses (BundleError, before
    anything is written) when DIR/<name>/ holds anything bundle.json does not account for: vendoring would replace
    or leave it, and verify refuses it."""
    listed = dict((previous or {}).get("specs", {}).get(name, {}).get("archs", {}))
    sdir = to / name
    foreign: list[Path] = []
    if sdir.is_symlink() or (sdir.exists() and not sdir.is_dir()):
        foreign.append(sdir)
    elif sdir.is_dir():
        for child in sorted(sdir.iterdir()):
            if child.name not in listed or child.is_symlink() or not child.is_dir():
                foreign.append(child)
                continue
            lib = listed[child.name].get("library")
            ours = {MANIFEST, *([lib] if isinstance(lib, str) else [])}
            foreign += [f for f in sorted(child.iterdir()) if f.name not in ours or f.is_symlink() or not f.is_file()]
    if foreign:
        shown = ", ".join(str(f.relative_to(to)) for f in foreign[:5]) + (f" and {len(foreign) - 5} more"
                                                                         if len(foreign) > 5 else "")
        raise BundleError(f"{sdir} holds what kda2 vendor did not write: {shown} ({to / INDEX} lists "
                          f"{', '.join(sorted(listed)) or 'no arch'} of {name}, each a library and {MANIFEST}); "
                          "`kda2 verify` would refuse the bundle, and vendoring replaces an arch's directory whole: "
                          "move it out of the bundle and vendor again. Nothing was written")
    kept, dropped = {}, []
    for arch, entry in sorted(listed.items()):
        if arch in archs:
            continue
        if not (sdir / arch).exists():  # removed by hand: the index follows what is on disk
            dropped.append(arch)
            continue
        try:
            manifest = bundle.verify_arch(to, name, arch, entry)
        except BundleError as e:
            raise BundleError(f"{e} ({arch} of {name} is kept when vendoring {', '.join(archs)}: vendor it too "
                              f"(--arch {arch}), or remove {sdir / arch}); nothing was written") from None
        if manifest.get("family") != previous["specs"][name].get("family"):
            raise BundleError(f"{sdir / arch / MANIFEST}: family {manifest.get('family')!r}, {to / INDEX} says "
                              f"{previous['specs'][name].get('family')!r}: vendor {arch} too (--arch {arch}), or "
                              f"remove {sdir / arch}; nothing was written")
        kept[arch] = entry
    return kept, dropped


def _source_manifest(mpath: Path, raw: bytes, spec: str, arch: str) -> dict[str, Any]:
    try:
        m = json.loads(raw)
    except ValueError as exc:
        raise BundleError(f"{mpath}: not valid JSON ({exc}); rebuild it (`scons`)") from exc
    if not isinstance(m, dict) or m.get("schema") != MANIFEST_SCHEMA:
        raise BundleError(f"{mpath}: manifest schema {m.get('schema') if isinstance(m, dict) else None!r}, this kda2 "
                          f"writes {MANIFEST_SCHEMA}; rebuild it (`scons`)")
    if "bundle" in m:
        raise BundleError(f"{mpath}: is a bundle manifest; vendor from a build directory (--build-dir)")
    if (m.get("spec"), m.get("arch")) != (spec, arch):
        raise BundleError(f"{mpath}: says spec {m.get('spec')!r} arch {m.get('arch')!r}, not {spec}/{arch}; rebuild it")
    for key in ("files", "library", "variants", "dispatch", "family"):
        if key not in m:
            raise BundleError(f"{mpath}: field {key!r} is missing; rebuild it (`scons`)")
    return m


def _read_listed(mpath: Path, d: Path, rel: str) -> bytes:
    path = d / rel
    if not bundle.plain_name(rel) or not path.is_file():
        raise BundleError(f"missing artifact {path} (listed in {mpath}); rebuild it (`scons`)")
    return path.read_bytes()


class _RulesLock:
    """rules/rules.lock.json: each matched rule's body digest, for the provenance (read only when needed)."""

    def __init__(self, rules_dir: Path):
        self.path = rules_dir / RULES_LOCK
        self._lock: dict[str, Any] | None = None

    def get(self, rid: str, version: int, used_by: str) -> dict[str, Any]:
        if self._lock is None:
            try:
                self._lock = json.loads(self.path.read_bytes())
            except (OSError, ValueError) as exc:
                raise BundleError(f"cannot read {self.path} for the digests of the rules the build matched "
                                  f"({type(exc).__name__}); pass --rules <the rules directory the build used>") from exc
        entry = self._lock.get(rid)
        if not isinstance(entry, dict) or entry.get("version") != version:
            have = f"v{entry.get('version')}" if isinstance(entry, dict) else "no entry"
            raise BundleError(f"{used_by} matched rule {rid}@v{version}, but {self.path} has {have}: the build is "
                              "stale (rebuild with `scons`) or --rules names another rules directory")
        return {"version": version, "digest": entry.get("digest")}
