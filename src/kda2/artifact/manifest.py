"""manifest.json: what a (spec, arch) build produced, with the sha256 of every file.

The runtime trusts nothing it cannot verify against this file; it needs only json and hashlib.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterable, Mapping

#: Bumped with every change of the manifest's keys; the runtime refuses any other.
SCHEMA = 2
#: The manifest's "candidates": what of its plan a build compiled (`scons CANDIDATES=`, `kda2 build --candidates`).
#: "routed": the variants its dispatch rows route to, what a deployment runs (the default); "all": every candidate the
#: agents kept, which `kda2 tune` times. A manifest without the field predates it and holds every candidate.
CANDIDATE_SETS = ("routed", "all")
#: Where each set is built unless `scons BUILD_DIR=` says otherwise: the routed set in build/, what `kda2 vendor` ships
#: and `kda2.load` finds; every candidate in a tree of its own (a spec name cannot start with "_"), so a tuning build
#: never replaces what ships.
DEFAULT_BUILD_DIRS = {"routed": "build", "all": "build/_candidates"}
#: Fields of a dispatch row the manifest carries and the library's own table (kda2_library_json) leaves out: the
#: tuned latency (the runtime monitor's baseline) and the reasons for the split knob. Everything else routes.
MANIFEST_ONLY_ROW_FIELDS = ("tuned", "split_why")


def check_candidates(candidates: str) -> None:
    """Raise ValueError naming the allowed sets unless `candidates` is one of CANDIDATE_SETS."""
    if candidates not in CANDIDATE_SETS:
        raise ValueError(f"CANDIDATES={candidates!r}; allowed: {', '.join(CANDIDATE_SETS)} (routed: the variants the "
                         f"dispatch routes to; all: every candidate, for kda2 tune)")


def default_build_dir(candidates: str) -> str:
    """The build tree of a candidate set (DEFAULT_BUILD_DIRS); ValueError naming the sets for another value."""
    check_candidates(candidates)
    return DEFAULT_BUILD_DIRS[candidates]


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_manifest(base: Mapping[str, Any], files: Iterable[str], root: str) -> str:
    """`base` plus {"files": {relative path: sha256}}, the library's sha256 and each variant's
    resources (read from the resources.json its entry names)."""
    rel = {os.path.relpath(f, root): sha256_file(f) for f in files}
    m = dict(base)
    m["files"] = dict(sorted(rel.items()))
    m["library"] = {"path": base["library"], "sha256": rel[base["library"]]}
    variants = []
    for v in base["variants"]:
        with open(os.path.join(root, v["resources"])) as f:
            resources = json.load(f)
        variants.append(dict(v, resources=resources, resources_path=v["resources"]))
    m["variants"] = variants
    return json.dumps(m, sort_keys=True, indent=1) + "\n"
