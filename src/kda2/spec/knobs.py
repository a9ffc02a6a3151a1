"""Knob tables: every field a kernel config of each family may hold, with the values it may take.

Specs name agents' choices from these, rules match and set fields from these, and the planner's
configs hold exactly these (docs/DESIGN.md §3, "kernel identity"). A field here that does not change
the generated code does not belong here.
"""
from __future__ import annotations

from typing import Any, Mapping

from kda2.artifact.abi import CHUNK
from kda2.plan.hardware import ARCHS

#: Knobs a `recurrent` variant has, with the values each may take. Rules may match on exactly these
#: fields (plus `arch`, `family`, `bucket`); anything else is an error naming this table.
RECURRENT_FIELDS: dict[str, tuple[Any, ...] | type] = {
    "family": ("recurrent",),
    "arch": ARCHS,
    "k": (32, 64, 128, 256),
    "v": (32, 64, 128, 256),
    "bucket": int,                       # rules may match on it (it picks the dispatch row, never the code)
    "profile": str,                      # rules may match on it (the hardware profile planned for, never the code)
    "state_layout": ("k_first", "v_first"),
    "prefetch": (False, True),           # software-pipeline the next token's inputs (off for decode-only kernels)
    "intermediate": (False, True),       # per-token states (args.intermediate) compiled in: decode-like buckets
    "state_dtypes": tuple,               # state dtypes with entries: ("fp32",), or ("fp32", "bf16") (opt-in decode)
    "v_per_warp": (2, 4, 8, 16, 32),     # value columns one warp owns (32: one per lane, k_map all)
    "warps": (1, 2, 4, 8),               # warps per CTA (they share one smem state tile)
    "staging": ("smem", "direct", "bulk"),  # state tile: through shared memory, straight to registers, or bulk copies
    "k_map": ("strided", "blocked", "all"),  # key rows of a lane: l + 32*i, l*K/32 + i, or all K
    "lane_cols": (1, 2, 4),              # adjacent value columns per lane (k_map all; 1 otherwise)
    "reduce": ("butterfly", "scatter"),  # warp reduction of the per-column sums: xor all-reduce or reduce-scatter
    # Resident CTAs per SM the kernel's launch bounds ask for (register cap registers_per_sm / (threads · n));
    # absent = 1, ptxas's own choice, so the configs (and ids) of kernels without it are unchanged.
    "min_ctas": tuple(range(1, 17)),
    # Decode: the inputs of this many tokens (the bucket's T, 1 for one-token decode) copied to shared memory at CTA
    # entry, beside the state loads; absent = none (inputs loaded in the token loop), so other kernels' ids are unchanged.
    "preload": tuple(range(1, 17)),
    # Persistent CTAs (decode): a grid of min(tiles, resident CTA slots), each looping over tiles with the next
    # tile's state copied to shared memory meanwhile; absent = False, one tile per CTA, so other ids are unchanged.
    "persistent": (False, True),
    "gate_modes": tuple,                 # compiled-in gate activations (sorted)
    "dtypes": tuple,                     # input dtypes with an entry each: ("bf16",), ("fp16",), ("bf16", "fp16")
    "qk_l2norm": (False, True),
    "beta_sigmoid": (False, True),
    "varlen": (False, True),
}

#: v_per_warp values a spec may list (`agents.tile`): the knob's, but 32 — one value column per lane, a tile the
#: planner proposes itself for k_map = all.
SPEC_V_PER_WARP = tuple(v for v in RECURRENT_FIELDS["v_per_warp"] if v != 32)

#: Decode buckets: a seq_len bucket up to this length is a decode bucket (one token or a few speculative ones per
#: sequence): judged at the bandwidth-bound batch (DESIGN §1.1 D3), the only buckets bulk staging, preload, per-token
#: states and the bf16 state are planned for. Here, not in plan/, because the spec's checks need it too.
DECODE_MAX_T = 16

#: Staging modes a spec may list per state layout (`agents.staging`): smem staging is built for k_first tiles only
#: (include/kda2/recurrent.cuh: "smem staging is built for k_first tiles"), so v_first takes the others.
SPEC_STAGING = {"k_first": RECURRENT_FIELDS["staging"],
                "v_first": tuple(s for s in RECURRENT_FIELDS["staging"] if s != "smem")}

#: Head dims the chunk kernels build with (K = V; kda2/chunk.cuh maps its 256 prep threads onto K: K/8 lanes per
#: l2norm row, 256/K threads per channel in the gate scan, two w/u column halves of K/2). At K = 256 the prep's
#: shared memory (~186 KB) admits one CTA per SM and the state kernel fits one stage only.
CHUNK_HEAD_DIMS = (64, 128, 256)

#: The one head dim (K = V) the fused 16-token kernel is written for (kda2/fused.cuh Fused16: a thread a channel in the
#: gate scan, a warpgroup per 64 value rows, 16 channels a warp in step 2).
FUSED_HEAD_DIM = 128

#: Knobs a `chunk` (chunkwise-parallel tensor-core prefill) variant has. Two kernels per variant: a
#: parallel prep pass over all chunks, then the serial state pass per (sequence, head, V-slice).
CHUNK_FIELDS: dict[str, tuple[Any, ...] | type] = {
    "family": ("chunk",),
    "arch": ARCHS,
    "k": CHUNK_HEAD_DIMS,
    "v": CHUNK_HEAD_DIMS,
    "bucket": int,                       # rules may match on it (it picks the dispatch row, never the code)
    "profile": str,                      # rules may match on it (the hardware profile planned for, never the code)
    "state_layout": ("k_first", "v_first"),
    "chunk": (CHUNK,),                   # tokens per chunk (the ABI's workspace layout)
    "block_v": (16, 32, 64, 128),        # value columns per CTA of the state kernel (warps = block_v / 16)
    "stages": (1, 2),                    # cp.async pipeline depth of the state kernel
    # how the state kernel multiplies (plan/smem.py STATE_MMAS): absent = "mma_sync", so other ids are unchanged
    "state_mma": ("mma_sync", "wgmma"),
    # how the prep makes w and u: T by block levels then mma.sync products, or blocked substitution on warpgroup MMAs
    # (sm_90a; docs/DESIGN.md §1): absent = "levels", so other ids are unchanged
    "prep_wu": ("levels", "bfs"),
    # the fused 16-token kernel (kda2/fused.cuh; sm_90a, K = V = 128) beside the variant's two kernels: it runs the
    # variant's unsplit calls in one pass with no workspace, the two kernels its split ones (docs/DESIGN.md §1, "the
    # fused twin"): absent = False, so other ids are unchanged
    "fused": (False, True),
    "gate_modes": tuple,                 # compiled-in gate activations (sorted)
    "dtypes": tuple,                     # input dtypes with a prep + state entry each (fold, combine shared)
    # q/k l2norm, β-sigmoid and varlen are run-time branches of the chunk kernels (KDA2Flags, cu_seqlens):
    # not knobs, so they split no kernel; the library checks calls against the spec's features.
}

#: Input (q/k/v/o) dtypes a spec may list (`features.input_dtypes`), in the order a variant's entries are built.
INPUT_DTYPES = ("bf16", "fp16")

#: Spec features that are run-time options of a family's kernels rather than compiled in.
RUNTIME_FEATURES = ("qk_l2norm", "beta_sigmoid", "varlen")

FAMILY_FIELDS = {"recurrent": RECURRENT_FIELDS, "chunk": CHUNK_FIELDS}

#: Fields rules may match on that are not part of a config (they place a kernel, they are not its code).
MATCH_ONLY_FIELDS = ("bucket", "profile")

#: Per family, the knobs the planner's agents choose (the rest of a config is what the spec compiles in):
#: what a tuning line, a failure record and a proposed rule name a candidate by.
AGENT_KNOBS = {
    "recurrent": ("state_layout", "prefetch", "staging", "k_map", "v_per_warp", "lane_cols", "warps", "reduce",
                  "min_ctas", "preload", "persistent"),
    "chunk": ("state_layout", "chunk", "block_v", "stages", "state_mma", "prep_wu", "fused"),
}
#: Knobs a config leaves out where they hold this value (so the ids of the variants before the knob stand):
#: failure records name them with it, and a rule matching on it matches the configs that leave it out.
ABSENT_KNOB_DEFAULTS = {"chunk": {"state_mma": "mma_sync", "prep_wu": "levels", "fused": False}}


def knob(config: Mapping[str, Any], name: str) -> Any:
    """A knob of a variant config, its ABSENT_KNOB_DEFAULTS value where the config leaves it out."""
    return config[name] if name in config else ABSENT_KNOB_DEFAULTS[config["family"]][name]


def agent_knobs(config: Mapping[str, Any]) -> dict[str, Any]:
    """The agents' knobs of a variant config (what a failure record or a tuning line names it by)."""
    absent = ABSENT_KNOB_DEFAULTS.get(config["family"], {})
    return {k: config.get(k, absent.get(k)) for k in AGENT_KNOBS[config["family"]] if k in config or k in absent}
