"""A kernel variant: one concrete configuration of a kernel family, and its content id.

The planner produces variants, rules adjust them, the TIR stage lays out their shared memory, the
render turns them into CUDA. Everything downstream keys on `variant_id(config)`, the short sha256 of
the canonical JSON of the config, so equal configs are one artifact wherever they come from.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

#: Knobs a `recurrent` variant has, with the values each may take. Rules may match on exactly these
#: fields (plus `arch`, `family`, `bucket`); anything else is an error naming this table.
RECURRENT_FIELDS: dict[str, tuple[Any, ...] | type] = {
    "family": ("recurrent",),
    "arch": ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"),
    "k": (32, 64, 128, 256),
    "v": (32, 64, 128, 256),
    "bucket": int,                       # largest sequence length this variant serves
    "state_layout": ("k_first", "v_first"),
    "v_per_warp": (2, 4, 8, 16, 32),     # value columns one warp owns (32: one per lane, k_map all)
    "warps": (1, 2, 4, 8),               # warps per CTA (they share one smem state tile)
    "staging": ("smem", "direct"),       # state tile: through shared memory, or straight to registers
    "k_map": ("strided", "blocked", "all"),  # key rows of a lane: l + 32*i, l*K/32 + i, or all K
    "lane_cols": (1, 2, 4),              # adjacent value columns per lane (k_map all; 1 otherwise)
    "reduce": ("butterfly", "scatter"),  # warp reduction of the per-column sums: xor all-reduce or reduce-scatter
    "gate_modes": tuple,                 # compiled-in gate activations (sorted)
    "qk_l2norm": (False, True),
    "beta_sigmoid": (False, True),
    "varlen": (False, True),
}

#: Knobs a `chunk` (chunkwise-parallel tensor-core prefill) variant has. Two kernels per variant: a
#: parallel prep pass over all chunks, then the serial state pass per (sequence, head, V-slice).
CHUNK_FIELDS: dict[str, tuple[Any, ...] | type] = {
    "family": ("chunk",),
    "arch": ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"),
    "k": (64, 128),
    "v": (64, 128),
    "bucket": int,                       # largest sequence length routed here (the kernels take any length)
    "state_layout": ("k_first", "v_first"),
    "chunk": (64,),                      # tokens per chunk
    "block_v": (16, 32, 64, 128),        # value columns per CTA of the state kernel (warps = block_v / 16)
    "stages": (1, 2),                    # cp.async pipeline depth of the state kernel
    "gate_modes": tuple,                 # compiled-in gate activations (sorted)
    "qk_l2norm": (False, True),
    "beta_sigmoid": (False, True),
    "varlen": (False, True),
}

FAMILY_FIELDS = {"recurrent": RECURRENT_FIELDS, "chunk": CHUNK_FIELDS}

#: Bumped when the meaning of a config field changes, so old cache entries cannot be mistaken for new.
CONFIG_SCHEMA = 1


def canonical_json(obj: Any) -> str:
    """Key-sorted, whitespace-free JSON: the one spelling of a config that ids and digests use."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def variant_id(config: Mapping[str, Any]) -> str:
    """Deterministic short id of a config (12 hex digits of sha256 over schema + canonical JSON)."""
    text = f"kda2-variant-{CONFIG_SCHEMA}:" + canonical_json(dict(config))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def variant_name(config: Mapping[str, Any]) -> str:
    """Procedural name that says what the variant is (CUTLASS style), plus its id."""
    c = config
    layout = "kf" if c["state_layout"] == "k_first" else "vf"
    head = f"kda2_{c['family']}_{c['arch']}_k{c['k']}v{c['v']}_{layout}_t{c['bucket']}"
    if c["family"] == "chunk":
        return f"{head}_c{c['chunk']}bv{c['block_v']}s{c['stages']}_{variant_id(c)}"
    return f"{head}_vpw{c['v_per_warp']}w{c['warps']}_{c['staging']}_{variant_id(c)}"
