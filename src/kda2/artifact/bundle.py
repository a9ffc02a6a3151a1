"""Deployable bundles (`kda2 vendor`): the bundle's layout, its manifest schema, and its verification.

A bundle holds only what the runtime needs, per spec and arch; its cubins are embedded in the library:

    DIR/bundle.json                        index: format, kda2 version, per spec its family and archs, each
                                           with the sha256 of its bundle manifest and of the build manifest
                                           it was made from
    DIR/README.md                          what it is, how to load it, how to verify it
    DIR/<spec>/<arch>/lib<spec>.<arch>.so  the library (C ABI kda2/abi.h; every kernel's cubin inside)
    DIR/<spec>/<arch>/manifest.json        the build manifest's runtime keys (schema, abi_version, spec, arch,
                                           family, k, v, features, buckets, dispatch with its tuned timings,
                                           variants with config, rules, flags and resources, toolchain,
                                           spec_digest), `files` = the bundled files only, and `bundle`: the
                                           provenance (created_from, rules digests, per kernel the sha256 of
                                           every build file and where its cubin lies inside the .so, sizes)

The runtime loads a bundle like a build directory (kda2.runtime.loader resolves DIR through bundle.json).
Everything is written with sorted keys and no timestamps, so vendoring an unchanged build twice gives
byte-identical bundles. Verification is integrity, not authenticity: a sha256 chain bundle.json ->
manifest.json -> files, with no signature. Standard library only: the runtime imports this module.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from kda2.artifact.manifest import SCHEMA as MANIFEST_SCHEMA
from kda2.artifact.manifest import sha256_file

INDEX = "bundle.json"
MANIFEST = "manifest.json"
README = "README.md"
#: Bumped with every change of bundle.json's or the manifest's `bundle` keys; verify refuses any other.
FORMAT = 1
#: Files that a loader or a person could take for part of a bundle: never tolerated unlisted.
_MATTERS_SUFFIX = (".so", ".cubin", ".o", ".ptx", ".fatbin")
_MATTERS_NAME = (INDEX, MANIFEST)
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")  # a spec, arch or file name: one path component


class BundleError(ValueError):
    """A bundle is missing a file, has a corrupt or foreign one, or is not a bundle at all."""


def dumps(obj: Any) -> str:
    """The one JSON spelling of bundle files: sorted keys, one-space indent, trailing newline."""
    return json.dumps(obj, sort_keys=True, indent=1) + "\n"


def plain_name(name: str) -> bool:
    """A spec, arch or file name that is one path component (no '/', not '.' or '..')."""
    return bool(_NAME.fullmatch(name))


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_problem(path: Path, sha: str, listed_in: Path) -> str | None:
    """What is wrong with `path`, listed in the manifest `listed_in` with sha256 `sha`: missing, or other bytes;
    None when it matches. The one wording of `kda2 verify` (a bundle) and `kda2 inspect` (a build directory)."""
    if not path.is_file():
        return f"missing file {path} (listed in {listed_in})"
    actual = sha256_file(path)
    if actual != sha:
        return f"corrupt file {path}: sha256 {actual}, {listed_in} expects {sha}"
    return None


# ---- writing (used by kda2.tools.vendor) -----------------------------------------------------------

def parse_rule_ref(ref: str) -> tuple[str, int]:
    """'0002@v1' (a variant's `rules` entry) -> ('0002', 1)."""
    m = re.fullmatch(r"(\d{4})@v(\d+)", ref)
    if not m:
        raise BundleError(f"rule reference {ref!r} is not of the form NNNN@vN")
    return m[1], int(m[2])


def make_manifest(source: Mapping[str, Any], *, source_sha256: str, library: bytes,
                  build_files: Mapping[str, bytes], rules: Mapping[str, Mapping[str, Any]],
                  kda2_version: str) -> dict[str, Any]:
    """The bundle manifest of one (spec, arch) build.

    `source` is the build's manifest (`source_sha256` the sha256 of its bytes), `library` the .so's bytes,
    `build_files` the bytes of every other file the build manifest lists (for the kernels' provenance;
    each cubin is located inside the .so), `rules` {id: {version, digest}} of the rules the variants
    matched.
    """
    where = f"{source.get('spec')}/{source.get('arch')} build manifest"
    src_files: Mapping[str, str] = source["files"]
    lib_name = source["library"]["path"]
    if sha256_bytes(library) != src_files.get(lib_name):
        raise BundleError(f"{where}: {lib_name} does not match the manifest's sha256; rebuild it (`scons`)")
    for rel, data in build_files.items():
        if sha256_bytes(data) != src_files.get(rel):
            raise BundleError(f"{where}: {rel} does not match the manifest's sha256; rebuild it (`scons`)")
    variants, kernels = [], {}
    for v in source["variants"]:
        # paths into the build directory name files a bundle does not carry: their hashes go to `kernels`
        variants.append({k: x for k, x in v.items() if not (isinstance(x, str) and x in src_files)})
        cubin = build_files.get(v.get("cubin", ""))
        if cubin is None:
            raise BundleError(f"{where}: variant {v.get('id')} names no cubin listed under 'files'")
        offset = library.find(cubin)
        if offset < 0:
            raise BundleError(f"{where}: {lib_name} does not embed {v['cubin']} (variant {v['id']}): the build "
                              "directory mixes two builds; rebuild it (`scons`)")
        prefix = f"{v['name']}."
        kernels[v["id"]] = {
            "name": v["name"],
            "embedded": {"offset": offset, "size": len(cubin), "sha256": sha256_bytes(cubin)},
            "build_files": {rel[len(prefix):]: sha for rel, sha in src_files.items() if rel.startswith(prefix)},
        }
    tuned = [d["tuned"] for d in source["dispatch"] if isinstance(d.get("tuned"), dict)]
    m = {k: x for k, x in source.items() if k not in ("files", "library", "variants", "bundle")}
    m["variants"] = variants
    m["library"] = {"path": lib_name, "sha256": sha256_bytes(library)}
    m["files"] = {lib_name: sha256_bytes(library)}
    m["bundle"] = {
        "format": FORMAT,
        "kda2_version": kda2_version,
        "created_from": {"build": f"{source['spec']}/{source['arch']}", "manifest_sha256": source_sha256},
        "rules": {rid: dict(r) for rid, r in sorted(rules.items())},
        "kernels": kernels,
        "sizes": {lib_name: len(library)},
        "tuned": {"routes": len(tuned), "of": len(source["dispatch"]),
                  "gpus": sorted({str(t.get("gpu")) for t in tuned if t.get("gpu")})},
    }
    return m


def make_index(previous: Mapping[str, Any] | None, spec: str, family: str,
               archs: Mapping[str, Mapping[str, Any]], kda2_version: str) -> dict[str, Any]:
    """bundle.json after vendoring `spec` (its archs replace the spec's previous entry; other specs stay)."""
    specs = dict(previous.get("specs", {})) if previous else {}
    specs[spec] = {"family": family, "archs": {a: dict(e) for a, e in sorted(archs.items())}}
    return {"format": FORMAT, "kda2_version": kda2_version, "specs": dict(sorted(specs.items()))}


def readme(index: Mapping[str, Any]) -> str:
    """DIR/README.md, generated from the index alone (so it is as reproducible as the rest)."""
    specs = index["specs"]
    rows = "\n".join(f"| `{s}` | {e['family']} | {a} | `{s}/{a}/{x['library']}` | `{x['library_sha256'][:16]}…` |"
                     for s, e in specs.items() for a, x in e["archs"].items())
    first = next(iter(specs))
    one = len(specs) == 1
    family = specs[first]["family"]
    call = "chunk_kda" if family == "chunk" else "fused_recurrent_kda"
    arch0 = next(iter(specs[first]["archs"]))
    return f"""# kda2 kernel bundle

Prebuilt Kimi Delta Attention CUDA kernels, vendored by `kda2 vendor` (kda2 {index['kda2_version']}, bundle
format {index['format']}). It holds only what the runtime needs: per spec and GPU arch, the library
(`lib<spec>.<arch>.so`, C ABI `kda2/abi.h`, every kernel's cubin embedded) and a `manifest.json` with the
sha256 of each file and the build's provenance (spec digest, rules and their digests, toolchain, buckets,
dispatch with tuned timings and the GPU they were measured on, per kernel its config, flags, registers and
shared memory, and the sha256 of every build file it came from). `bundle.json` indexes it all.

| spec | family | arch | library | sha256 |
|---|---|---|---|---|
{rows}

## Load

Needs only the runtime: `pip install kda2` (numpy, cuda-python; torch for tensor calls). No compiler.

```python
import kda2
lib = kda2.load("path/to/this/directory"{'' if one else f' + "/{first}"'})  # the arch is chosen for the current GPU
lib = kda2.load("path/to/this/directory/{first}", arch="{arch0}")  # or force one (e.g. on a CPU host)
# then pass it to the calls: kda2.{call}(..., library=lib)
```

Or set `KDA2_BUILD_DIR=path/to/this/directory` and the calls find the library of each family by themselves.
Loading checks every file's sha256 before the library is opened.

## Verify

```bash
kda2 verify path/to/this/directory
```

checks bundle.json -> each manifest -> each file by sha256 and size (and each kernel's cubin inside the
library), that every manifest belongs to its `<spec>/<arch>` directory, that no unlisted library, cubin or
manifest lies in the bundle, that nothing in it is a symbolic link (copy the bundle whole, not as links), and
that it has code for this host's GPU. Exit 0, or one line `kda2: error: ...` naming the file and exit 2. This
is integrity, not authenticity: nothing is signed.
"""


# ---- reading (runtime and `kda2 verify`) -------------------------------------------------------------

def read_index(root: Path) -> dict[str, Any]:
    """bundle.json of the bundle at `root`, checked for shape (not yet against the files)."""
    path = root / INDEX
    if not path.is_file():
        up = next((p for p in (root.parent, root.parent.parent) if (p / INDEX).is_file()), None)
        hint = f"; it lies inside the bundle {up}: pass that" if up else " (make one with `kda2 vendor SPEC --to DIR`)"
        raise BundleError(f"{root}: no {INDEX}, so not a kda2 bundle root{hint}")
    index = _json(path)
    if index.get("format") != FORMAT:
        raise BundleError(f"{path}: bundle format {index.get('format')!r}, this kda2 reads format {FORMAT}; "
                          "re-vendor it with this kda2")
    specs = index.get("specs")
    if not isinstance(specs, dict) or not specs:
        raise BundleError(f"{path}: field 'specs' is missing or empty")
    for spec, entry in specs.items():
        archs = entry.get("archs") if isinstance(entry, dict) else None
        if not _NAME.fullmatch(spec) or not isinstance(archs, dict) or not archs:
            raise BundleError(f"{path}: entry {spec!r} of 'specs' is malformed (needs a name and 'archs')")
        for arch, a in archs.items():
            if not _NAME.fullmatch(arch) or not isinstance(a, dict) or not isinstance(a.get("manifest_sha256"), str):
                raise BundleError(f"{path}: specs.{spec}.archs.{arch} is malformed (needs 'manifest_sha256')")
    return index


def spec_dir(root: Path) -> Path:
    """The one spec directory of the bundle at `root` (what `kda2.load(DIR)` loads)."""
    specs = sorted(read_index(root)["specs"])
    if len(specs) > 1:
        raise BundleError(f"{root} bundles {len(specs)} specs ({', '.join(specs)}); load one of "
                          f"{', '.join(str(root / s) for s in specs)}, or set KDA2_BUILD_DIR={root}")
    return root / specs[0]


def bundle_root_of(manifest_path: Path) -> Path | None:
    """The bundle root when `manifest_path` is DIR/<spec>/<arch>/manifest.json of a bundle, else None."""
    root = manifest_path.parent.parent.parent
    return root if (root / INDEX).is_file() else None


def check_placement(manifest_path: Path, manifest: Mapping[str, Any]) -> None:
    """A bundle manifest must describe the <spec>/<arch> directory it lies in."""
    spec, arch = manifest_path.parent.parent.name, manifest_path.parent.name
    if (manifest.get("spec"), manifest.get("arch")) != (spec, arch):
        raise BundleError(f"{manifest_path}: belongs to spec {manifest.get('spec')!r} arch {manifest.get('arch')!r}, "
                          f"not to the directory {spec}/{arch} it lies in (copied from another bundle or spec?); "
                          "re-vendor it")


def verify(root: Path) -> dict[str, dict[str, Any]]:
    """Check the whole bundle at `root`; return {spec: {"family", "archs": [...]}} or raise BundleError
    naming the first file at fault. Loads nothing."""
    root = Path(root)
    index = read_index(root)
    _refuse_links(root)
    expected: set[Path] = {root / INDEX}
    summary = {}
    for spec, entry in sorted(index["specs"].items()):
        sdir = root / spec
        if not sdir.is_dir():
            raise BundleError(f"missing directory {sdir} (spec {spec} is listed in {root / INDEX})")
        for child in sorted(sdir.iterdir()):
            if child.name not in entry["archs"]:
                raise BundleError(f"unlisted {'directory' if child.is_dir() else 'file'} {child}: {root / INDEX} "
                                  f"lists archs {', '.join(sorted(entry['archs']))} for {spec}; remove it or re-vendor")
        for arch, a in sorted(entry["archs"].items()):
            manifest = verify_arch(root, spec, arch, a)
            if manifest.get("family") != entry.get("family"):
                raise BundleError(f"{sdir / arch / MANIFEST}: family {manifest.get('family')!r}, {root / INDEX} "
                                  f"says {entry.get('family')!r}")
            expected |= {sdir / arch / MANIFEST, *(sdir / arch / rel for rel in manifest["files"])}
        summary[spec] = {"family": entry.get("family"), "archs": sorted(entry["archs"])}
    for path in sorted(root.rglob("*")):  # e.g. a stray library, or what an interrupted vendor left
        if path.is_file() and path not in expected and (path.suffix in _MATTERS_SUFFIX or path.name in _MATTERS_NAME):
            raise BundleError(f"unlisted file {path} in the bundle (no manifest lists it); remove it or re-vendor")
    return summary


def verify_arch(root: Path, spec: str, arch: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    d = root / spec / arch
    mpath = d / MANIFEST
    if not d.is_dir():
        raise BundleError(f"missing directory {d} ({spec} {arch} is listed in {root / INDEX})")
    if not mpath.is_file():
        raise BundleError(f"missing file {mpath} (listed in {root / INDEX})")
    raw = mpath.read_bytes()
    manifest = _json(mpath, raw)
    if manifest.get("schema") != MANIFEST_SCHEMA:
        raise BundleError(f"{mpath}: manifest schema {manifest.get('schema')!r}, this kda2 reads {MANIFEST_SCHEMA}")
    check_placement(mpath, manifest)
    prov = manifest.get("bundle")
    if not isinstance(prov, dict) or prov.get("format") != FORMAT:
        raise BundleError(f"{mpath}: not a bundle manifest of format {FORMAT} (a build manifest? "
                          "bundle it with `kda2 vendor`)")
    actual = sha256_bytes(raw)
    if actual != entry["manifest_sha256"]:
        raise BundleError(f"{mpath}: sha256 {actual}, but {root / INDEX} records {entry['manifest_sha256']} "
                          "(edited or replaced after vendoring); re-vendor it")
    files, lib = manifest.get("files"), manifest.get("library")
    if not isinstance(files, dict) or not files or not isinstance(lib, dict) or lib.get("path") not in files:
        raise BundleError(f"{mpath}: 'files' must list the library ('library.path')")
    if lib.get("sha256") != files[lib["path"]]:
        raise BundleError(f"{mpath}: library.sha256 disagrees with files[{lib['path']!r}]")
    sizes = prov.get("sizes", {})
    for rel, sha in sorted(files.items()):
        if not _NAME.fullmatch(rel):
            raise BundleError(f"{mpath}: listed file {rel!r} is not a plain file name in {d}")
        path = d / rel
        if path.is_file():  # the size and the embedded cubins first: they say more than a sha256 would
            size, want = path.stat().st_size, sizes.get(rel)
            if want is not None and size != want:
                how = f"truncated: {size} of {want} bytes" if size < want else f"{size} bytes, {want} expected"
                raise BundleError(f"corrupt file {path}: {how} (listed in {mpath})")
            if rel == lib["path"]:
                _verify_embedded(path, mpath, prov.get("kernels", {}))
        problem = file_problem(path, sha, mpath)
        if problem:
            raise BundleError(problem)
    for child in sorted(d.iterdir()):
        if child.name != MANIFEST and child.name not in files:
            raise BundleError(f"unlisted {'directory' if child.is_dir() else 'file'} {child} (not in {mpath}); "
                              "remove it or re-vendor")
    return manifest


def _refuse_links(root: Path) -> None:
    """A bundle holds its files themselves: a symbolic link anywhere in it (a library, a manifest, a directory)
    makes it depend on what lies outside, which neither travels with a copy of the bundle nor is covered by its
    hashes (the target can change after verify)."""
    for top, dirs, files in os.walk(root):  # links to directories are listed in `dirs`, never entered
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(top) / name
            if path.is_symlink():
                raise BundleError(f"{path} is a symbolic link (to {os.readlink(path)}), not a file of the bundle: "
                                  "a bundle must hold its files themselves (a link does not travel with it); replace "
                                  "the link with the file it points to, or re-vendor")


def _verify_embedded(so: Path, mpath: Path, kernels: Mapping[str, Any]) -> None:
    """Each kernel's cubin, at its recorded place inside the library: names the kernel a bad byte hits."""
    data = so.read_bytes()
    for vid, k in sorted(kernels.items()):
        e = k.get("embedded") or {}
        start, size = int(e.get("offset", -1)), int(e.get("size", -1))
        if start < 0 or size <= 0 or start + size > len(data):
            raise BundleError(f"corrupt file {so}: the cubin of kernel {k.get('name', vid)} (bytes {start}..{start + size}) "
                              f"lies outside its {len(data)} bytes (per {mpath})")
        actual = sha256_bytes(data[start:start + size])
        if actual != e.get("sha256"):
            raise BundleError(f"corrupt file {so}: the cubin of kernel {k.get('name', vid)} embedded at bytes "
                              f"{start}..{start + size} has sha256 {actual}, {mpath} expects {e.get('sha256')}")


def _json(path: Path, raw: bytes | None = None) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_bytes() if raw is None else raw)
    except ValueError as exc:
        raise BundleError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(obj, dict):
        raise BundleError(f"{path}: expected a JSON object")
    return obj
