"""The TIR stage's entry points: config -> PrimFunc -> `kda2.bank_pad` pass -> plan.json + dumps.

TVM is imported lazily, inside the functions: `import kda2.tir` stays cheap.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any, Mapping

from kda2.artifact.atomic import write_text
from kda2.tir.errors import TirBudgetError, TirConfigError

PLAN_SCHEMA = 1
PASS_NAME = "kda2.bank_pad"           # mirrors bankpass.PASS_NAME without importing TVM
_STAGINGS = ("smem", "direct", "bulk")
_K_MAPS = ("strided", "blocked")


def _int_field(c: Mapping[str, Any], key: str) -> int:
    if key not in c:
        raise TirConfigError(f"config has no {key!r} (the TIR stage needs k, warps, v_per_warp, "
                             f"staging, and k_map for staging=smem)")
    value = c[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TirConfigError(f"config field {key!r} must be a positive integer, got {value!r}")
    return value


_FAMILIES = ("recurrent", "chunk")


def _choice(c: Mapping[str, Any], key: str, allowed: tuple) -> Any:
    value = c.get(key)
    if isinstance(value, bool) or value not in allowed:
        raise TirConfigError(f"config field {key!r} must be one of {allowed}, got {value!r}")
    return value


def check_chunk_config(c: Mapping[str, Any]) -> dict:
    """The fields the chunk TIR model reads, validated; raises TirConfigError naming the field."""
    from kda2.spec.knobs import CHUNK_FIELDS, FUSED_HEAD_DIM, knob  # the values a chunk config may hold: one table

    out = {f: _choice(c, f, CHUNK_FIELDS[f]) for f in ("k", "v", "block_v", "stages", "chunk")}
    out["state_mma"] = _choice({"state_mma": knob({"family": "chunk", **c}, "state_mma")}, "state_mma",
                               CHUNK_FIELDS["state_mma"])
    if out["state_mma"] == "wgmma":
        from kda2.plan.smem import WG_COLS
        if out["block_v"] % WG_COLS or c.get("arch") != "sm_90a":
            raise TirConfigError(f"config field 'state_mma': wgmma needs block_v a multiple of {WG_COLS} (one warpgroup "
                                 f"per {WG_COLS} value columns) and arch sm_90a, got block_v {out['block_v']}, arch "
                                 f"{c.get('arch')!r}")
    out["prep_wu"] = _choice({"prep_wu": knob({"family": "chunk", **c}, "prep_wu")}, "prep_wu", CHUNK_FIELDS["prep_wu"])
    if out["prep_wu"] == "bfs" and c.get("arch") != "sm_90a":
        raise TirConfigError(f"config field 'prep_wu': bfs runs on warpgroup MMAs, which need arch sm_90a, got arch "
                             f"{c.get('arch')!r} (levels runs everywhere)")
    out["fused"] = knob({"family": "chunk", **c}, "fused")
    if not isinstance(out["fused"], bool):
        raise TirConfigError(f"config field 'fused' must be one of {CHUNK_FIELDS['fused']}, got {out['fused']!r}")
    if out["fused"] and (c.get("arch") != "sm_90a" or not out["k"] == out["v"] == FUSED_HEAD_DIM):
        raise TirConfigError(f"config field 'fused': the fused kernel (kda2/fused.cuh) runs on warpgroup MMAs at "
                             f"K = V = {FUSED_HEAD_DIM}, which need arch sm_90a, got arch {c.get('arch')!r}, "
                             f"K {out['k']}, V {out['v']}")
    return out


def check_config(config: Mapping[str, Any]) -> dict:
    """The fields the TIR stage reads, validated; raises TirConfigError naming the field."""
    c = dict(config)
    family = c.get("family", "recurrent")
    if family not in _FAMILIES:
        raise TirConfigError(f"TIR stage models families {_FAMILIES}, got {family!r}")
    if family == "chunk":
        checked = check_chunk_config(c)
        if checked["k"] != checked["v"]:
            raise TirConfigError(f"config field 'v' ({checked['v']}) must equal k ({checked['k']}): the chunk "
                                 "kernels' q/k/v tiles share one layout")
        if checked["block_v"] > checked["v"]:
            raise TirConfigError(f"config field 'block_v' ({checked['block_v']}) must not exceed v ({checked['v']})")
        return checked
    k, warps, vpw = _int_field(c, "k"), _int_field(c, "warps"), _int_field(c, "v_per_warp")
    if k % 32:
        raise TirConfigError(f"config field 'k' must be a multiple of 32 (one row per lane), got {k}")
    staging = c.get("staging")
    if staging not in _STAGINGS:
        raise TirConfigError(f"config field 'staging' must be one of {_STAGINGS}, got {staging!r}")
    k_map = c.get("k_map")
    if staging == "smem" and k_map not in _K_MAPS:
        raise TirConfigError(f"config field 'k_map' must be one of {_K_MAPS}, got {k_map!r}")
    if staging == "bulk" and k_map not in _K_MAPS + ("all",):
        raise TirConfigError(f"config field 'k_map' must be one of {_K_MAPS + ('all',)}, got {k_map!r}")
    out = {"k": k, "warps": warps, "v_per_warp": vpw, "staging": staging, "k_map": k_map}
    if staging == "bulk":
        layout = c.get("state_layout")
        if layout not in ("k_first", "v_first"):
            raise TirConfigError(f"config field 'state_layout' must be one of ('k_first', 'v_first'), got {layout!r}")
        out["state_layout"] = layout
    if k_map == "all":  # the per-warp token stage of the k_map=all kernel (kda2.tir.recurrent.all_k_stage_func)
        lane_cols = _int_field(c, "lane_cols")
        if vpw % lane_cols or 32 % (vpw // lane_cols) or k % (32 // (vpw // lane_cols) * 4):
            raise TirConfigError(f"config fields 'v_per_warp' ({vpw}) and 'lane_cols' ({lane_cols}): lane column "
                                 "groups must tile the warp and split K into rows of whole float4s")
        out["lane_cols"] = lane_cols
    persistent = c.get("persistent", False)
    if not isinstance(persistent, bool):
        raise TirConfigError(f"config field 'persistent' must be a bool, got {persistent!r}")
    if persistent and staging != "direct":
        raise TirConfigError("config field 'persistent': the persistent kernels copy the next tile's state into "
                             f"their own buffer, so staging must be 'direct', got {staging!r}")
    out["persistent"] = persistent
    preload = c.get("preload", 0)   # tokens of inputs in shared memory: part of the kernel's budget
    if isinstance(preload, bool) or not isinstance(preload, int) or preload < 0:
        raise TirConfigError(f"config field 'preload' must be a non-negative int, got {preload!r}")
    out["preload"] = preload
    return out


def _label(config: Mapping[str, Any]) -> str:
    from kda2.plan.variant import variant_id, variant_name
    try:
        return variant_name(config)
    except (KeyError, TypeError):
        return f"variant {variant_id(config)}"


def plan_variant(config: Mapping[str, Any], smem_budget: int, *, enable_pass: bool = True) -> dict:
    """Plan the shared-memory staging of one variant (see the package docstring for the keys).

    Raises TirBudgetError when even the unpadded tile exceeds ``smem_budget`` bytes, and
    TirConfigError for a config the model cannot represent.
    """
    if isinstance(smem_budget, bool) or not isinstance(smem_budget, int) or smem_budget < 0:
        raise TirConfigError(f"smem_budget must be a non-negative integer, got {smem_budget!r}")
    c = check_config(config)
    if config.get("family") == "chunk":
        return _plan_chunk(config, c, smem_budget, enable_pass)
    import tvm

    from kda2.tir import bankpass, recurrent as staging

    geo = staging.tile_geometry(c["k"], c["warps"], c["v_per_warp"])
    if c["staging"] == "direct":
        func = staging.direct_staging_func(c["k"], c["warps"], c["v_per_warp"])
    elif c["staging"] == "bulk":
        func = staging.bulk_stage_func(c["k"], c["warps"], c["v_per_warp"], c["k_map"],
                                       c["state_layout"] == "v_first", c.get("lane_cols", 1))
    else:
        func = staging.smem_staging_func(c["k"], c["warps"], c["v_per_warp"], c["k_map"])
    mod = tvm.IRModule({"main": func})
    after_mod = bankpass.make_bank_pad_pass(smem_budget, enable=enable_pass)(mod)
    after = after_mod["main"]
    plan: dict[str, Any] = {
        "schema": PLAN_SCHEMA,
        "staging": c["staging"],
        "tile": [geo["K"], geo["BV"]],
        "threads": geo["NT"],
        "smem_budget": smem_budget,
    }
    if c["staging"] == "direct" and c["k_map"] == "all":
        # no state tile; the token stage's row stride is the pass's decision (STAGE_ROW of recurrent.cuh)
        sfunc = staging.all_k_stage_func(c["k"], c["v_per_warp"], c["lane_cols"])
        safter = bankpass.make_bank_pad_pass(smem_budget, enable=enable_pass)(tvm.IRModule({"main": sfunc}))["main"]
        (buf,) = bankpass.to_python(safter.attrs[bankpass.ATTR])["buffers"].values()
        plan.update({
            "smem_stride": 0, "smem_pad": 0, "smem_bytes": 0,
            "vector_width": geo["VEC"], "coop_vector_width": 0,
            "stage_row": buf["row_stride"],
            "conflicts_before": buf["conflicts_before"], "conflicts_after": buf["conflicts_after"],
            "wavefronts_before": buf["wavefronts_before"], "wavefronts_after": buf["wavefronts_after"],
            "pass": {"name": PASS_NAME, "enabled": enable_pass, "candidates": buf["candidate_wavefronts"],
                     "note": "no state tile; the k_map=all token stage is laid out by the pass"},
        })
        func, after = sfunc, safter
    elif c["staging"] == "direct":
        plan.update({
            "smem_stride": 0, "smem_pad": 0, "smem_bytes": 0,
            "vector_width": geo["VEC"], "coop_vector_width": 0,
            "conflicts_before": {}, "conflicts_after": {},
            "pass": {"name": PASS_NAME, "enabled": enable_pass, "candidates": {},
                     "note": "no shared buffer: nothing to pad"},
        })
    elif c["staging"] == "smem":  # (bulk: _plan_bulk below, once the tile's own dumps are in the plan)
        record = bankpass.to_python(after.attrs[bankpass.ATTR])
        if not record["fits"]:
            need = geo["K"] * geo["BV"] * 4
            raise TirBudgetError(f"{_label(config)}: shared-memory state tile needs {need} bytes "
                                 f"(K={geo['K']} x BV={geo['BV']} fp32), budget is {smem_budget} bytes")
        (buf,) = record["buffers"].values()
        plan.update({
            "smem_stride": buf["row_stride"],
            "smem_pad": buf["pad"],
            "smem_bytes": buf["bytes"],
            "vector_width": buf["vector_widths"]["read"],
            "coop_vector_width": buf["vector_widths"]["fill"],
            "conflicts_before": buf["conflicts_before"],
            "conflicts_after": buf["conflicts_after"],
            "pass": {"name": PASS_NAME, "enabled": enable_pass,
                     "candidates": buf["candidates"], "misaligned": buf["misaligned"]},
        })
    plan["tir_before"] = func.script()
    plan["tir_after"] = after.script()
    if c["staging"] == "bulk":
        _plan_bulk(config, c, plan, after, smem_budget, enable_pass)
    if c["persistent"]:
        _plan_prefetch(config, c, plan, smem_budget, enable_pass)
    return plan


def _plan_bulk(config: Mapping[str, Any], c: dict, plan: dict, after: Any, smem_budget: int, enable_pass: bool) -> None:
    """Bulk-staged variants: the tile's row pitch (``bulk_pitch``, recurrent.cuh BULK_PITCH) is its row: one copy per tile;
    k_map=all kernels also keep their per-warp token stage (``stage_row``, as the direct ones). The whole shared
    memory (tile, stage, preload buffer and table, the mbarrier) is checked against the budget."""
    import tvm

    from kda2.plan.hardware import STATIC_SMEM_PER_BLOCK
    from kda2.plan.model import bulk_tile_bytes, preload_bytes, stage_bytes
    from kda2.tir import bankpass, recurrent as staging

    record = bankpass.to_python(after.attrs[bankpass.ATTR])
    (buf,) = record["buffers"].values()
    geo = staging.bulk_geometry({**c, "lane_cols": c.get("lane_cols", 1)})
    # Bulk tiles stay unpadded whatever the bank model ranks: a v_first tile is contiguous in the state and moves by
    # one linear copy, a k_first one by one tensor-map box, which lands its rows back to back (recurrent.cuh
    # StateMaps). A pad would take one copy per row, served at the copy engine's per-copy rate (128 copies of 256 B
    # per CTA: 130.9 us at N = 64 against 76.7 us by direct loads, kda2 tune, H200, 2026-12-01) — a cost the bank
    # model does not see. The pass's ranking stays in the plan (candidates); the tile's conflicts and wavefronts, and
    # its TIR, are those of the unpadded layout.
    pitch = geo["ROW"]
    plan["tir_after"] = plan["tir_before"]
    plan.update({
        "smem_stride": 0, "smem_pad": 0, "smem_bytes": 0, "vector_width": 0, "coop_vector_width": 0,
        "bulk_pitch": pitch, "bulk_pad": 0, "bulk_rows": geo["ROWS"], "bulk_bytes": bulk_tile_bytes(c),
        "conflicts_before": buf["conflicts_before"], "conflicts_after": buf["conflicts_before"],
        "wavefronts_before": buf["wavefronts_before"], "wavefronts_after": buf["wavefronts_before"],
        "pass": {"name": PASS_NAME, "enabled": enable_pass, "candidates": buf["candidate_wavefronts"],
                 "misaligned": buf["misaligned"],
                 "note": "bulk staging: the copy engine fills and drains the tile by one copy (v_first: linear, "
                         "k_first: a tensor-map box), so its rows stay unpadded"},
    })
    if c["k_map"] == "all":
        sfunc = staging.all_k_stage_func(c["k"], c["v_per_warp"], c["lane_cols"])
        safter = bankpass.make_bank_pad_pass(smem_budget, enable=enable_pass)(tvm.IRModule({"main": sfunc}))["main"]
        (sbuf,) = bankpass.to_python(safter.attrs[bankpass.ATTR])["buffers"].values()
        plan["stage_row"] = sbuf["row_stride"]
        plan["tir_before"] += "\n" + sfunc.script()
        plan["tir_after"] += "\n" + safter.script()
    stage_row = plan.get("stage_row")
    static = 8 + stage_bytes(c, stage_row) + preload_bytes(c, stage_row)
    need = plan["bulk_bytes"] + static
    if not record["fits"] or need > smem_budget:
        raise TirBudgetError(f"{_label(config)}: the bulk-staged state tile needs {plan['bulk_bytes']} bytes "
                             f"({geo['ROWS']} rows of {pitch} fp32), {need} bytes of shared memory in "
                             f"all, budget is {smem_budget} bytes")
    if static > STATIC_SMEM_PER_BLOCK:
        raise TirBudgetError(f"{_label(config)}: {static} bytes of static shared memory beside the bulk tile "
                             f"(token stage, preload buffer, mbarrier); CUDA allows {STATIC_SMEM_PER_BLOCK}")


def _plan_prefetch(config: Mapping[str, Any], c: dict, plan: dict, smem_budget: int, enable_pass: bool) -> None:
    """Persistent variants: the layout of the next-tile state copy buffer (kda2.tir.recurrent.prefetch_stage_func),
    the keys the template reads (prefetch_vec, prefetch_row), and the kernel's whole shared memory against the
    budget (the buffer beside the k_map=all token stage or the preload buffer and table)."""
    import tvm

    from kda2.plan.model import preload_bytes, stage_bytes
    from kda2.tir import bankpass, recurrent as staging

    geo = staging.prefetch_geometry(config)
    func = staging.prefetch_stage_func(geo["RUNS"], geo["RUN"], geo["NT"])
    after = bankpass.make_bank_pad_pass(smem_budget, enable=enable_pass)(tvm.IRModule({"main": func}))["main"]
    record = bankpass.to_python(after.attrs[bankpass.ATTR])
    (buf,) = record["buffers"].values()
    # beside it: the k_map=all token stage or, with preload, the copy buffer and the prepared table (rows laid
    # out like the stage), at the pass's stage_row
    stage_row = plan.get("stage_row")
    stage = stage_bytes(c, stage_row) + preload_bytes(c, stage_row)
    need = buf["bytes"] + stage + plan["smem_bytes"]
    if not record["fits"] or need > smem_budget:
        raise TirBudgetError(f"{_label(config)}: the persistent state copy buffer needs {buf['bytes']} bytes "
                             f"({geo['ROWS']} rows x {geo['NT']} threads x {geo['VEC']} fp32), {need} bytes of shared "
                             f"memory in all, budget is {smem_budget} bytes")
    plan.update({
        "prefetch_vec": geo["VEC"], "prefetch_row": buf["row_stride"], "prefetch_rows": geo["ROWS"],
        "prefetch_bytes": buf["bytes"],
        "prefetch": {"conflicts_before": buf["conflicts_before"], "conflicts_after": buf["conflicts_after"],
                     "wavefronts_before": buf["wavefronts_before"], "wavefronts_after": buf["wavefronts_after"],
                     "candidates": buf["candidate_wavefronts"], "misaligned": buf["misaligned"]},
    })
    plan["tir_before"] += "\n" + func.script()
    plan["tir_after"] += "\n" + after.script()


@functools.lru_cache(maxsize=64)
def _chunk_layouts(k: int, block_v: int, v: int, mma: str, enable_pass: bool):
    """One TVM run per distinct tile set (the stages and the gate modes do not change a layout): the model,
    the function after the pass, and the pass's record."""
    import tvm

    from kda2.tir import bankpass, chunk

    func = chunk.chunk_staging_func(k, block_v, v, mma)
    # The model holds the tiles of three kernels, so its total is no kernel's footprint: the budget is
    # checked per kernel, with the chosen layouts, by the caller.
    after = bankpass.make_bank_pad_pass(1 << 40, enable=enable_pass)(tvm.IRModule({"main": func}))["main"]
    return func, after, bankpass.to_python(after.attrs[bankpass.ATTR])


def _plan_chunk(config: Mapping[str, Any], c: dict, smem_budget: int, enable_pass: bool) -> dict:
    """Chunk family: the bank pass decides the layout of every shared tile (kda2.tir.chunk), then both
    kernels' shared memory is sized with those layouts and checked against the budget.

    Plan keys the template reads: lds_kv, lds_u, lds_g, lds_t, lds_t16, lds_y, lds_o, lds_x (row strides),
    swz_w, swz_qg, swz_kg, swz_aqk (XOR swizzle on or off), prep_threads, state_threads, prep_smem_bytes,
    state_smem_bytes (formulas in kda2.plan.smem), prep_tma (the prep's tiles by tensor copies), fused_threads and
    fused_smem_bytes (the fused twin's kernel; 0 where the variant has none).
    """
    from kda2.plan import smem as chunk_smem
    from kda2.tir import chunk

    func, after, record = _chunk_layouts(c["k"], c["block_v"], c["v"], c["state_mma"], enable_pass)
    buffers = record["buffers"]
    strides = {key: buffers[name]["row_stride"] for name, key in chunk.STRIDE_KEYS.items()}
    swizzles = {key: buffers[name]["swizzle"] == "xor" for name, key in chunk.SWIZZLE_KEYS.items()}
    if c["state_mma"] == "wgmma" and not all(swizzles.values()):
        raise TirConfigError(f"{_label(config)}: the wgmma state kernel reads w, qg, kg and Aqk by descriptor, which "
                             f"needs their panel (xor) layout; the pass chose {swizzles}")
    # Tiles the prep kernel lays over others once those are dead (chunk.cuh asserts the same): T over the k
    # tile, running on into the Γ tile after it where its rows are longer; the staging and the scratch over
    # the rest of Γ (from the first 16-byte boundary T leaves free).
    gamma = 64 * strides["lds_g"] * 4
    t_over = max(0, 64 * strides["lds_t"] * 4 - 64 * strides["lds_kv"] * 2)
    rest = gamma - -(-t_over // 16) * 16
    overlays = (("T over the k tile and Γ", 64 * strides["lds_t"] * 4, 64 * strides["lds_kv"] * 2 + gamma - 16),
                ("the w staging over Γ", 64 * strides["lds_kv"] * 2, rest),
                ("the uᵀ staging over Γ", c["v"] * strides["lds_u"] * 2, rest),
                ("the block-level scratch over Γ", 8 * 32 * strides["lds_y"] * 4, rest),
                ("the 16-bit T over the A tile", 64 * strides["lds_t16"] * 2, 64 * strides["lds_t"] * 4))
    for what, need, room in overlays:
        if need > room:
            raise TirBudgetError(f"{_label(config)}: {what} needs {need} bytes, the tile under it has {room} "
                                 f"(row strides {', '.join(f'{k}={v}' for k, v in sorted(strides.items()))})")
    prep = chunk_smem.prep_smem_bytes(strides)
    state = chunk_smem.state_smem_bytes(strides, k=c["k"], block_v=c["block_v"], stages=c["stages"],
                                        mma=c["state_mma"])
    fused = chunk_smem.fused_smem_bytes(c["k"]) if c["fused"] else 0
    for kernel, need in (("prep", prep), ("state", state), ("fused", fused)):
        if need > smem_budget:
            raise TirBudgetError(f"{_label(config)}: the {kernel} kernel needs {need} bytes of shared memory "
                                 f"(K={c['k']}, block_v={c['block_v']}, stages={c['stages']}, row strides "
                                 f"{', '.join(f'{k}={v}' for k, v in sorted(strides.items()))}), budget is "
                                 f"{smem_budget} bytes")
    plan: dict[str, Any] = {
        "schema": PLAN_SCHEMA,
        "family": "chunk",
        "smem_budget": smem_budget,
        "tiles": {name: buffers[name]["shape_before"] for name in buffers},
        **strides,
        **swizzles,
        "prep_threads": chunk_smem.PREP_THREADS,
        "state_threads": chunk_smem.state_threads(c["block_v"], c["state_mma"]),
        "prep_smem_bytes": prep,
        "state_smem_bytes": state,
        # the fused twin's third kernel (kda2/fused.cuh; 0 threads: none), laid out by its header, not by this pass
        "fused_threads": chunk_smem.FUSED_THREADS if c["fused"] else 0,
        "fused_smem_bytes": fused,
        # the prep's tiles by tensor copies where the chosen strides fit a box row (kda2.plan.smem.prep_tma)
        "prep_tma": chunk_smem.prep_tma(config["arch"], strides),
        "conflicts_before": {a: d for b in buffers.values() for a, d in b["conflicts_before"].items()},
        "conflicts_after": {a: d for b in buffers.values() for a, d in b["conflicts_after"].items()},
        # per access, per 64-token chunk (prep accesses: per warp pattern; see kda2.tir.chunk): the pass's
        # prediction of shared-memory wavefronts, what `ncu` counts
        "wavefronts_before": {a: d for b in buffers.values() for a, d in b["wavefronts_before"].items()},
        "wavefronts_after": {a: d for b in buffers.values() for a, d in b["wavefronts_after"].items()},
        "instructions": {a: d for b in buffers.values() for a, d in b["instructions"].items()},
        "pass": {"name": PASS_NAME, "enabled": enable_pass,
                 "layouts": {name: {"transform": b["transform"], "row_stride": b["row_stride"], "pad": b["pad"],
                                    "swizzle": b["swizzle"], "candidates": b["candidate_wavefronts"]}
                             for name, b in buffers.items()},
                 "misaligned": {name: b["misaligned"] for name, b in buffers.items()}},
        "tir_before": func.script(),
        "tir_after": after.script(),
    }
    return plan


def plan_json_text(plan: Mapping[str, Any]) -> str:
    """The plan.json bytes: the plan without the two TIR texts, key-sorted, indented."""
    body = {k: v for k, v in plan.items() if k not in ("tir_before", "tir_after")}
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


def write_plan(config: Mapping[str, Any], smem_budget: int, plan_json_path: str | os.PathLike,
               before_path: str | os.PathLike, after_path: str | os.PathLike, *,
               enable_pass: bool = True) -> dict:
    """Plan the variant and write plan.json and the before/after TIR dumps (each atomically).

    Nothing is written when planning fails (e.g. TirBudgetError). Returns the full plan.
    """
    plan = plan_variant(config, smem_budget, enable_pass=enable_pass)
    for path, text in ((before_path, plan["tir_before"]), (after_path, plan["tir_after"])):
        write_text(path, text if text.endswith("\n") else text + "\n")
    write_text(plan_json_path, plan_json_text(plan))
    return plan
