"""A kernel variant: one concrete configuration of a kernel family, and its content id.

The planner produces variants, rules adjust them, the TIR stage lays out their shared memory, the
render turns them into CUDA. A config holds exactly what changes the generated code (docs/DESIGN.md
§3, "kernel identity"): arch, family, head dims, compiled-in features and the agents' knobs. A
seq_len bucket is not in it: a bucket is a dispatch-table row that points at a kernel, so buckets
served by the same code share one kernel. `variant_id(config)`, the short sha256 of the canonical
JSON of the config, names the kernel wherever it comes from.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from kda2.artifact.canonical import canonical_json

#: Bumped when the meaning of a config field changes, so old cache entries cannot be mistaken for new.
CONFIG_SCHEMA = 2


def variant_id(config: Mapping[str, Any]) -> str:
    """Deterministic short id of a config (12 hex digits of sha256 over schema + canonical JSON)."""
    text = f"kda2-variant-{CONFIG_SCHEMA}:" + canonical_json(dict(config))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def splits(config: Mapping[str, Any]) -> bool:
    """Whether a variant runs the exact split (has a fold kernel, docs/DESIGN.md §1): every chunk variant, on
    either state pass; a split call routed to a variant without one would run on its layout's first that has one
    (kda2_fwd's splittable; the routed build keeps that variant, kda2.plan.planner.built)."""
    return config.get("family") == "chunk"


def variant_name(config: Mapping[str, Any]) -> str:
    """Procedural name that says what the variant is (CUTLASS style), plus its id."""
    c = config
    layout = "kf" if c["state_layout"] == "k_first" else "vf"
    head = f"kda2_{c['family']}_{c['arch']}_k{c['k']}v{c['v']}_{layout}"
    if c["family"] == "chunk":
        fused = "_fused16" if c.get("fused") else ""   # the fused twin (docs/DESIGN.md §1)
        return f"{head}_c{c['chunk']}bv{c['block_v']}s{c['stages']}{fused}_{variant_id(c)}"
    pipe = ("pf" if c.get("prefetch") else "nopf") + ("_it" if c.get("intermediate") else "")
    cols = f"x{c['lane_cols']}" if c.get("lane_cols", 1) != 1 else ""
    pipe += f"_o{c['min_ctas']}" if c.get("min_ctas", 1) != 1 else ""
    pipe += f"_pl{c['preload']}" if c.get("preload") else ""
    pipe += "_ps" if c.get("persistent") else ""
    return (f"{head}_vpw{c['v_per_warp']}{cols}w{c['warps']}_{c['staging']}_{c['k_map']}_{c['reduce']}_{pipe}"
            f"_{variant_id(c)}")
