"""Render stage: variant config + TIR plan -> a short .cu that instantiates a kernel header, and the
per-(spec, arch) host translation unit (docs/DESIGN.md §2.4).

The kernels are C++ templates on a config struct in `include/kda2/*.cuh`; a rendered .cu holds only
the config, one instantiation and the extern "C" entries, so it changes exactly when the code would.
Text in, text out: nothing here knows of nvcc or SCons, and nothing reads the agents' reasons.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from kda2.artifact.abi import GATE_MODES
from kda2.plan.variant import splits, variant_id, variant_name
from kda2.spec.knobs import INPUT_DTYPES as KNOB_INPUT_DTYPES
from kda2.spec.knobs import RUNTIME_FEATURES

TEMPLATE_DIR = Path(__file__).parent / "templates"
#: What kernels and the library include (`#include "kda2/..."`): the only -I of every compile.
INCLUDE_DIR = Path(__file__).parent / "include"
FAMILY_TEMPLATES = {"recurrent": ("recurrent.cu.j2",), "chunk": ("chunk.cu.j2",)}
LIBRARY_TEMPLATES = ("library.cpp.j2",)


@lru_cache(maxsize=1)
def _env():
    import jinja2  # build-time only: the runtime never imports this module

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


#: Input dtypes of the recurrent kernels (spec/knobs.py INPUT_DTYPES, in its order) -> (C element type,
#: entry-name infix). bf16 keeps the plain entry name `kda2_recurrent_<id>`.
INPUT_DTYPES = dict(zip(KNOB_INPUT_DTYPES, (("__nv_bfloat16", ""), ("__half", "f16_")), strict=True))


#: State dtypes of the recurrent kernels: spelling -> (C element type, entry-name infix); fp32 keeps the name.
STATE_DTYPES = {"fp32": ("float", ""), "bf16": ("__nv_bfloat16", "s16_")}


def kernel_symbol(vid: str, dtype: str = "bf16", state: str = "fp32") -> str:
    """The extern "C" entry of a recurrent variant's cubin for one input dtype and state dtype."""
    return f"kda2_recurrent_{INPUT_DTYPES[dtype][1]}{STATE_DTYPES[state][1]}{vid}"


def recurrent_entries(config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(input dtype, state dtype) of every entry of a recurrent variant, in entry order (configs before
    issue 13: bf16 inputs, fp32 states)."""
    return tuple((d, s) for s in config.get("state_dtypes", ("fp32",)) for d in config.get("dtypes", ("bf16",)))


def entry_slot(dtype: str, state: str) -> int:
    """Index of an (input dtype, state dtype) pair in the library's per-variant entry table: fp16 + 2 * bf16 state
    (the library computes it from KDA2_INPUT_FP16 and KDA2_STATE_BF16)."""
    return list(INPUT_DTYPES).index(dtype) + 2 * list(STATE_DTYPES).index(state)


def chunk_symbols(vid: str, dtypes: Sequence[str] = ("bf16",)) -> tuple[str, ...]:
    """The extern "C" entries of a chunk variant's cubin, in the library's kernel order: the first input
    dtype's prep, state (emit) and fold (docs/DESIGN.md §1 exact split), the combine (it reads fp32 transitions
    only, so one serves every dtype), then a (prep, state, fold) triple per further dtype (the fold reads the
    workspace, whose 16-bit tiles are in the input dtype). bf16 keeps the plain names `kda2_chunk_prep_<id>`,
    fp16 adds the infix `f16_` (as the recurrent entries)."""
    def triple(d: str) -> tuple[str, str, str]:
        infix = INPUT_DTYPES[d][1]
        return f"kda2_chunk_prep_{infix}{vid}", f"kda2_chunk_state_{infix}{vid}", f"kda2_chunk_fold_{infix}{vid}"

    first, *rest = dtypes
    return (*triple(first), f"kda2_chunk_combine_{vid}", *(sym for d in rest for sym in triple(d)))


def fused_symbols(vid: str, dtypes: Sequence[str] = ("bf16",)) -> tuple[str, ...]:
    """The fused twin's third kernel (kda2/fused.cuh), an entry per input dtype, after chunk_symbols' in the library's
    kernel order (bf16 `kda2_chunk_fused_<id>`, fp16 with the infix `f16_`)."""
    return tuple(f"kda2_chunk_fused_{INPUT_DTYPES[d][1]}{vid}" for d in dtypes)


def chunk_dtypes(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Input dtypes of a chunk variant, in entry order (configs before the chunk family's fp16: bf16)."""
    return tuple(config.get("dtypes", ("bf16",)))


def chunk_entry_index(config: Mapping[str, Any], dtype: str) -> int:
    """Index of `dtype`'s prep kernel in chunk_symbols' order; its state and fold kernels are the next two."""
    i = chunk_dtypes(config).index(dtype)
    return 0 if i == 0 else 4 + 3 * (i - 1)


def kernel_symbols(config: Mapping[str, Any], vid: str | None = None) -> tuple[str, ...]:
    """Every kernel entry of a variant, in launch order."""
    vid = variant_id(config) if vid is None else vid
    if config["family"] == "chunk":
        fused = fused_symbols(vid, chunk_dtypes(config)) if config.get("fused") else ()
        return chunk_symbols(vid, chunk_dtypes(config)) + fused
    return tuple(kernel_symbol(vid, d, s) for d, s in recurrent_entries(config))


def render_variant(config: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    """The .cu of one kernel variant: config struct + instantiation + extern "C" entries."""
    vid = variant_id(config)
    tmpl = _env().get_template(FAMILY_TEMPLATES[config["family"]][0])
    symbols = kernel_symbols(config, vid)
    if config["family"] == "chunk":
        from kda2.plan.smem import combine_shape
        triples = [(*symbols[chunk_entry_index(config, d):chunk_entry_index(config, d) + 3], INPUT_DTYPES[d][0])
                   for d in chunk_dtypes(config)]
        fused = fused_symbols(vid, chunk_dtypes(config)) if config.get("fused") else ()
        extra = dict(entries=triples, combine_symbol=symbols[3], combine=combine_shape(config["k"]),
                     fused_entries=[(sym, INPUT_DTYPES[d][0]) for sym, d in zip(fused, chunk_dtypes(config))])
    else:
        extra = {"entries": [(sym, INPUT_DTYPES[d][0], STATE_DTYPES[s][0])
                             for sym, (d, s) in zip(symbols, recurrent_entries(config))]}
    return tmpl.render(config=dict(config), plan=dict(plan), vid=vid, name=variant_name(config),
                       state_maps=takes_state_maps(config),
                       ns=f"kda2_{vid}", kernel_symbol=symbols[0], **extra)


def _entry_table(config: Mapping[str, Any]) -> list[int]:
    """The library's entry table of a variant: slot entry_slot(d, s) -> kernel index (chunk: of the dtype's prep
    kernel, its state and fold kernels next; chunk states are fp32 only), -1 where not built."""
    table = [-1] * (len(INPUT_DTYPES) * len(STATE_DTYPES))
    if config["family"] == "chunk":
        for d in chunk_dtypes(config):
            table[entry_slot(d, "fp32")] = chunk_entry_index(config, d)
        return table
    for i, (d, s) in enumerate(recurrent_entries(config)):
        table[entry_slot(d, s)] = i
    return table


def _fused_table(config: Mapping[str, Any]) -> list[int]:
    """The library's fused-kernel table of a chunk variant: slot entry_slot(d, "fp32") -> index of dtype d's fused
    kernel (kernel_symbols' order), -1 where the variant has none."""
    table = [-1] * (len(INPUT_DTYPES) * len(STATE_DTYPES))
    if config["family"] == "chunk" and config.get("fused"):
        first = len(chunk_symbols("", chunk_dtypes(config)))
        for i, d in enumerate(chunk_dtypes(config)):
            table[entry_slot(d, "fp32")] = first + i
    return table


def _chunk_launch(v: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """Block size and dynamic shared memory of each kernel of a chunk variant, in kernel_symbols' order: every
    prep alike, every fold like the state kernel (the same code), the combine with static shared memory only, then
    the fused twin's kernels."""
    from kda2.plan.smem import combine_shape
    p, dtypes = v["plan"], chunk_dtypes(v["config"])
    prep, state = (p["prep_threads"], p["prep_smem_bytes"]), (p["state_threads"], p["state_smem_bytes"])
    rows = ([prep, state, state, (combine_shape(v["config"]["k"])["threads"], 0)]
            + [prep, state, state] * (len(dtypes) - 1))
    if v["config"].get("fused"):
        rows += [(p["fused_threads"], p["fused_smem_bytes"])] * len(dtypes)
    return [t for t, _ in rows], [b for _, b in rows]


#: What the library TU reads from a chunk variant's plan (launch shapes, shared memory, whether the prep takes the
#: tensor maps of its tiles).
CHUNK_LAUNCH_KEYS = ("prep_threads", "state_threads", "prep_smem_bytes", "state_smem_bytes", "prep_tma", "lds_kv",
                     "lds_g", "fused_threads", "fused_smem_bytes")
#: What it reads from a bulk-staged recurrent variant's plan: the tile's rows and row pitch (its dynamic shared memory).
BULK_LAUNCH_KEYS = ("bulk_rows", "bulk_pitch")


def launch_keys(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The plan keys the library TU needs of a variant (none for recurrent kernels without a bulk tile)."""
    if config["family"] == "chunk":
        return CHUNK_LAUNCH_KEYS
    return BULK_LAUNCH_KEYS if config.get("staging") == "bulk" else ()


def takes_state_maps(config: Mapping[str, Any]) -> bool:
    """Whether a variant's entries take the tensor maps of h0 and ht as a second parameter (recurrent.cuh StateMaps,
    which the library encodes per call): the k_first bulk-staged kernels, whose tile is K rows of BV columns."""
    return config["family"] == "recurrent" and config.get("staging") == "bulk" and config["state_layout"] == "k_first"


def _recurrent_launch(v: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """Block size and dynamic shared memory of each entry of a recurrent variant: a bulk-staged kernel's tile
    (recurrent.cuh bulk_smem: rows x pitch elements of the entry's state dtype), nothing for the others."""
    cfg = v["config"]
    entries = recurrent_entries(cfg)
    if cfg.get("staging") == "bulk":
        p = v["plan"]
        smem = [p["bulk_rows"] * p["bulk_pitch"] * (4 if s == "fp32" else 2) for _, s in entries]
    else:
        smem = [0] * len(entries)
    return [32 * cfg["warps"]] * len(entries), smem


def render_library(spec_name: str, arch: str, variants: Sequence[Mapping[str, Any]],
                   dispatch: Sequence[Mapping[str, Any]], library_json: str,
                   features: Mapping[str, bool]) -> str:
    """The per-(spec, arch) host translation unit: C ABI, dispatch table, embedded cubins.

    `variants` are {"id", "config", "cubin_path"} in library index order (cubin_path as the compiler
    will see it from the build's working directory), and "plan" (at least the launch_keys of their TIR plan) where
    launch_keys names any; `dispatch` rows are {"state_layout", "bucket", "index"}
    sorted by (layout, bucket). `library_json` is a C string literal. `features` are the spec's
    RUNTIME_FEATURES (q/k l2norm, β-sigmoid, varlen), for the variants whose config does not fix them.
    All variants share one family and one (K, V).
    """
    families = {v["config"]["family"] for v in variants}
    dims = {(v["config"]["k"], v["config"]["v"]) for v in variants}
    if len(families) != 1 or len(dims) != 1:
        raise ValueError(f"a library holds one family and one (K, V); got families {sorted(families)}, "
                         f"(K, V) {sorted(dims)}")
    (family,), ((k, v_dim),) = families, dims
    rows = [dict(v, kernels=kernel_symbols(v["config"], v["id"]), dtype_kernel=_entry_table(v["config"]),
                 fused_kernel=_fused_table(v["config"]),
                 launch=_chunk_launch(v) if family == "chunk" else _recurrent_launch(v),
                 gate_mask=sum(1 << GATE_MODES[m] for m in v["config"]["gate_modes"]), splits=splits(v["config"]),
                 state_maps=takes_state_maps(v["config"]),
                 prep_maps=family == "chunk" and bool(v["plan"]["prep_tma"]),
                 allows={f: bool(v["config"].get(f, features[f])) for f in RUNTIME_FEATURES}) for v in variants]
    from kda2.plan.hardware import PDL_ARCHS
    from kda2.plan.smem import (FUSED_MAX_IMBALANCE_PCT, OVERLAP_MIN_CHUNKS, OVERLAP_SHORT, OVERLAP_SM_SHARE,
                                 SPLIT_MAX_SEGMENTS, SPLIT_MIN_SEGMENTS, SPLIT_SEGMENT_STEPS, SPLIT_SPILL_MIN_CHUNKS,
                                 combine_shape, split_min_chunks)
    tmpl = _env().get_template(LIBRARY_TEMPLATES[0])
    return tmpl.render(spec_name=spec_name, arch=arch, family=family, key_dim=k, value_dim=v_dim, variants=rows,
                       pdl=arch in PDL_ARCHS, overlap={"min_chunks": OVERLAP_MIN_CHUNKS, "sm_share": OVERLAP_SM_SHARE,
                                                         "short": OVERLAP_SHORT},
                       dispatch=list(dispatch), library_json=library_json, combine=combine_shape(k),
                       fused_max_imbalance_pct=FUSED_MAX_IMBALANCE_PCT,
                       split={"min_chunks": split_min_chunks(k), "min_segments": SPLIT_MIN_SEGMENTS,
                              "max_segments": SPLIT_MAX_SEGMENTS, "spill_min_chunks": SPLIT_SPILL_MIN_CHUNKS,
                              "segment_steps": SPLIT_SEGMENT_STEPS})
