"""manifest.json: what a (spec, arch) build produced, with the sha256 of every file.

The runtime trusts nothing it cannot verify against this file; it needs only json and hashlib.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterable, Mapping

SCHEMA = 1


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_manifest(base: Mapping[str, Any], files: Iterable[str], root: str) -> str:
    """`base` plus {"files": {relative path: sha256}} and per-variant cubin/resources entries."""
    rel = {os.path.relpath(f, root): sha256_file(f) for f in files}
    m = dict(base)
    m["files"] = dict(sorted(rel.items()))
    m["library"] = {"path": base["library"], "sha256": rel[base["library"]]}
    variants = []
    for v in base["variants"]:
        res_path = os.path.join(root, v["id"], "resources.json")
        with open(res_path) as f:
            resources = json.load(f)
        variants.append(dict(v, cubin=f"{v['id']}/kernel.cubin", resources=resources))
    m["variants"] = variants
    return json.dumps(m, sort_keys=True, indent=1) + "\n"
