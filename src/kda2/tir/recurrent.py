"""TVMScript models of how a recurrent variant stages its fp32 state tile.

The TVMScript parser reads the decorated function's source (`inspect.getsource`), so these
PrimFuncs must live in a real .py file. They are parameterised by closure constants: each builder
call parses a fresh PrimFunc whose loop extents and index arithmetic are plain integers.

Only this module and the pass import TVM; import it lazily (`import tvm` costs about a second).

The smem model, for a CTA of W warps (NT = 32*W threads) owning BV = W*v_per_warp value columns of
a [K, BV] fp32 state tile, in the order the CUDA kernel runs it:

1. ``fill``  (global -> smem): all threads, CV-float vectors, row-major over the tile.
2. ``read``  (smem -> registers): warp w, lane l, key rows of the lane (``k_map``), VEC-float
   vectors over the warp's own v_per_warp columns.
3. ``write`` (registers -> smem): the same addresses as ``read``.
4. ``drain`` (smem -> global): the same addresses as ``fill``.

Each phase is the outermost loop annotated ``{"kda2.access": name}``; the bank pass names the
shared accesses it finds by that annotation.
"""
import functools

import tvm
from tvm.script import tirx as T

#: Name of the PrimFunc (and so of the kernel, were it compiled).
SMEM_SYMBOL = "kda2_smem_stage"
DIRECT_SYMBOL = "kda2_direct_stage"


def widest_vector(n: int) -> int:
    """Largest of 4, 2, 1 floats that divides ``n`` (a float4 access needs 16-byte alignment)."""
    for width in (4, 2, 1):
        if n % width == 0:
            return width
    raise AssertionError("unreachable")


def tile_geometry(k: int, warps: int, v_per_warp: int) -> dict:
    """The integers the smem model is built from (also what the tests recompute independently)."""
    bv = warps * v_per_warp
    nt = 32 * warps
    cv = widest_vector(bv)
    vec = widest_vector(v_per_warp)
    nv = k * bv // cv
    return {"K": k, "BV": bv, "NT": nt, "CV": cv, "VEC": vec, "NV": nv,
            "FILL": -(-nv // nt), "KI": k // 32, "NJ": v_per_warp // vec}


@functools.lru_cache(maxsize=256)
def smem_staging_func(k: int, warps: int, v_per_warp: int, k_map: str) -> "tvm.tirx.PrimFunc":
    """PrimFunc modelling the smem staging of one CTA (cached: PrimFuncs are immutable)."""
    g = tile_geometry(k, warps, v_per_warp)
    K, BV, NT, CV, VEC, NV = g["K"], g["BV"], g["NT"], g["CV"], g["VEC"], g["NV"]
    FILL, KI, NJ = g["FILL"], g["KI"], g["NJ"]
    BVC = BV // CV          # CV-float vectors per tile row
    VPW = v_per_warp
    blocked = k_map == "blocked"
    model = {"family": "recurrent", "k": K, "warps": warps, "v_per_warp": VPW, "k_map": k_map,
             "tile": [K, BV], "threads": NT, "coop_vector": CV, "compute_vector": VEC}

    # `blocked` is a Python constant: the parser evaluates `if blocked:` and keeps one branch.
    @T.prim_func
    def kda2_smem_stage(state_ptr: T.handle):
        T.func_attr({"global_symbol": SMEM_SYMBOL, "kda2.model": model})
        state = T.match_buffer(state_ptr, (K, BV), "float32")
        T.device_entry()
        tx = T.thread_id([NT])
        sm = T.alloc_shared((K, BV), "float32")
        reg = T.alloc_local((KI * VPW,), "float32")
        for it in T.serial(FILL, annotations={"kda2.access": "fill"}):
            if it * NT + tx < NV:
                for v in T.vectorized(CV):
                    sm[(it * NT + tx) // BVC, (it * NT + tx) % BVC * CV + v] = state[
                        (it * NT + tx) // BVC, (it * NT + tx) % BVC * CV + v]
        T.cuda.cta_sync()
        for i in T.serial(KI, annotations={"kda2.access": "read"}):
            for j in T.serial(NJ):
                for v in T.vectorized(VEC):
                    if blocked:
                        reg[i * VPW + j * VEC + v] = sm[tx % 32 * KI + i, tx // 32 * VPW + j * VEC + v]
                    else:
                        reg[i * VPW + j * VEC + v] = sm[tx % 32 + 32 * i, tx // 32 * VPW + j * VEC + v]
        # (the recurrence updates the state in registers here)
        for i in T.serial(KI, annotations={"kda2.access": "write"}):
            for j in T.serial(NJ):
                for v in T.vectorized(VEC):
                    if blocked:
                        sm[tx % 32 * KI + i, tx // 32 * VPW + j * VEC + v] = reg[i * VPW + j * VEC + v]
                    else:
                        sm[tx % 32 + 32 * i, tx // 32 * VPW + j * VEC + v] = reg[i * VPW + j * VEC + v]
        T.cuda.cta_sync()
        for it in T.serial(FILL, annotations={"kda2.access": "drain"}):
            if it * NT + tx < NV:
                for v in T.vectorized(CV):
                    state[(it * NT + tx) // BVC, (it * NT + tx) % BVC * CV + v] = sm[
                        (it * NT + tx) // BVC, (it * NT + tx) % BVC * CV + v]

    return kda2_smem_stage


@functools.lru_cache(maxsize=16)
def direct_staging_func(k: int, warps: int, v_per_warp: int) -> "tvm.tirx.PrimFunc":
    """Trivial PrimFunc for ``staging: direct``: there is no shared buffer to lay out."""
    note = ("staging=direct: no shared-memory staging; each warp loads its state columns "
            "straight from global memory into registers")
    model = {"family": "recurrent", "k": k, "warps": warps, "v_per_warp": v_per_warp,
             "staging": "direct", "note": note}

    @T.prim_func
    def kda2_direct_stage():
        T.func_attr({"global_symbol": DIRECT_SYMBOL, "kda2.model": model})
        T.evaluate(0)

    return kda2_direct_stage


ALL_K_SYMBOL = "kda2_all_k_stage"


def all_k_geometry(k: int, v_per_warp: int, lane_cols: int) -> dict:
    """k_map = all: lane groups of CGROUPS lanes own a warp's columns, KSPLIT groups split K (RPL rows each)."""
    cgroups = v_per_warp // lane_cols
    ksplit = 32 // cgroups
    return {"K": k, "KPL": k // 32, "CGROUPS": cgroups, "KSPLIT": ksplit, "RPL": k // ksplit}


@functools.lru_cache(maxsize=16)
def all_k_stage_func(k: int, v_per_warp: int, lane_cols: int) -> "tvm.tirx.PrimFunc":
    """PrimFunc of the k_map=all kernel's per-warp token stage (recurrent.cuh `stage`): each token, lane l
    stores its key rows r = l + 32 i of q, k and the decay at [r / RPL][r % RPL]; lane group p then reads
    row p of the stage as float4 (one address per group: a broadcast). One of the three identical arrays is
    modelled; its row stride is the kernel's STAGE_ROW."""
    g = all_k_geometry(k, v_per_warp, lane_cols)
    KPL, CGROUPS, KSPLIT, RPL = g["KPL"], g["CGROUPS"], g["KSPLIT"], g["RPL"]
    model = {"family": "recurrent", "k": k, "v_per_warp": v_per_warp, "lane_cols": lane_cols, "k_map": "all",
             "tile": [KSPLIT, RPL], "threads": 32}

    @T.prim_func
    def kda2_all_k_stage(q_ptr: T.handle):
        T.func_attr({"global_symbol": ALL_K_SYMBOL, "kda2.model": model})
        q = T.match_buffer(q_ptr, (k,), "float32")
        T.device_entry()
        tx = T.thread_id([32])
        stage = T.alloc_shared((KSPLIT, RPL), "float32")
        reg = T.alloc_local((4,), "float32")
        for i in T.serial(KPL, annotations={"kda2.access": "stage_store"}):
            stage[(tx + 32 * i) // RPL, (tx + 32 * i) % RPL] = q[tx + 32 * i]
        for r in T.serial(RPL // 4, annotations={"kda2.access": "stage_read"}):
            for e in T.vectorized(4):
                reg[e] = stage[tx // CGROUPS, r * 4 + e]

    return kda2_all_k_stage


PREFETCH_SYMBOL = "kda2_prefetch_stage"


def prefetch_geometry(config: dict) -> dict:
    """The persistent kernels' state copy buffer (recurrent.cuh PF_*): a thread's share of a tile is RUNS runs of
    RUN contiguous state elements (the vectors its direct loads read: k_map=all lane_cols columns of a key row;
    v_first KPL key rows of a column, one element when key rows are strided; k_first v_per_warp columns of a key
    row), copied in pieces of VEC elements (at most 16 bytes of fp32). Row m * (RUN / VEC) + p of the buffer holds
    piece p of run m of every thread, thread t at column t * VEC."""
    k, vpw, warps = config["k"], config["v_per_warp"], config["warps"]
    kpl = k // 32
    if config["k_map"] == "all":
        g = all_k_geometry(k, vpw, config["lane_cols"])
        runs, run = g["RPL"], config["lane_cols"]
    elif config["state_layout"] == "v_first":
        runs, run = (vpw * kpl, 1) if config["k_map"] == "strided" else (vpw, kpl)
    else:
        runs, run = kpl, vpw
    vec = widest_vector(run)
    return {"RUNS": runs, "RUN": run, "VEC": vec, "ROWS": runs * (run // vec), "NT": 32 * warps}


@functools.lru_cache(maxsize=64)
def prefetch_stage_func(runs: int, run: int, threads: int) -> "tvm.tirx.PrimFunc":
    """PrimFunc of the persistent kernels' copy buffer: each thread copies (cp.async) its pieces of the next tile's
    state into the buffer and, a tile later, reads the same addresses back (its own pieces only). Modelled in
    fp32 (bf16 states use the same element layout in half the bytes)."""
    vec = widest_vector(run)
    rows, width = runs * (run // vec), threads * vec
    model = {"family": "recurrent", "runs": runs, "run": run, "threads": threads, "tile": [rows, width],
             "note": "persistent decode: the next tile's state, copied global -> shared while this tile computes"}

    @T.prim_func
    def kda2_prefetch_stage(state_ptr: T.handle):
        T.func_attr({"global_symbol": PREFETCH_SYMBOL, "kda2.model": model})
        state = T.match_buffer(state_ptr, (rows, width), "float32")
        T.device_entry()
        tx = T.thread_id([threads])
        pf = T.alloc_shared((rows, width), "float32")
        reg = T.alloc_local((rows * vec,), "float32")
        for r in T.serial(rows, annotations={"kda2.access": "prefetch_copy"}):
            for e in T.vectorized(vec):
                pf[r, tx * vec + e] = state[r, tx * vec + e]
        for r in T.serial(rows, annotations={"kda2.access": "prefetch_read"}):
            for e in T.vectorized(vec):
                reg[r * vec + e] = pf[r, tx * vec + e]

    return kda2_prefetch_stage


BULK_SYMBOL = "kda2_bulk_stage"


def bulk_geometry(config: dict) -> dict:
    """The bulk-staged kernels' shared state tile (recurrent.cuh BK_*): the state's own rows — v_first: BV value
    rows of K; k_first: K key rows of BV — and what one thread moves between it and its registers (the elements its
    direct loads would read): ROWS x ROW fp32 tile, NT threads."""
    k, vpw, warps = config["k"], config["v_per_warp"], config["warps"]
    bv = vpw * warps
    v_first = config["state_layout"] == "v_first"
    geo = {"K": k, "BV": bv, "NT": 32 * warps, "KPL": k // 32, "V_FIRST": v_first,
           "ROWS": bv if v_first else k, "ROW": k if v_first else bv}
    if config["k_map"] == "all":
        geo.update(all_k_geometry(k, vpw, config["lane_cols"]), CW=config["lane_cols"])
    return geo


@functools.lru_cache(maxsize=64)
def bulk_stage_func(k: int, warps: int, v_per_warp: int, k_map: str, v_first: bool,
                    lane_cols: int = 1) -> "tvm.tirx.PrimFunc":
    """PrimFunc of the bulk-staged tile: bulk copies fill and drain it (the copy engine: no thread access, so no
    bank cost), each thread reads its share into registers after the fill and writes it back before the drain
    (``read`` / ``write``, the same addresses). The plan keeps the rows unpadded (one copy per tile: kda2.tir.plan
    _plan_bulk); the pass's wavefronts say what that costs. Modelled in fp32 (bf16 states: the same element layout in
    half the bytes)."""
    geo = bulk_geometry({"k": k, "warps": warps, "v_per_warp": v_per_warp, "k_map": k_map,
                         "state_layout": "v_first" if v_first else "k_first", "lane_cols": lane_cols})
    ROWS, ROW, NT, KPL = geo["ROWS"], geo["ROW"], geo["NT"], geo["KPL"]
    VPW = v_per_warp
    all_k, strided = k_map == "all", k_map == "strided"
    CG, RPL, CW = geo.get("CGROUPS", 1), geo.get("RPL", 1), geo.get("CW", 1)
    model = {"family": "recurrent", "k": k, "warps": warps, "v_per_warp": VPW, "k_map": k_map,
             "state_layout": "v_first" if v_first else "k_first", "tile": [ROWS, ROW], "threads": NT,
             "note": "bulk staging: the tile arrives and leaves by bulk copies; threads read and write their share"}
    # k_map, v_first: Python constants; the parser keeps one branch of each `if`.
    if all_k:
        NI, NE = RPL, CW          # rows of the lane's share, elements per vector
    elif v_first:
        NI, NE = VPW, (1 if strided else KPL)
    else:
        NI, NE = KPL, VPW

    @T.prim_func
    def kda2_bulk_stage():
        T.func_attr({"global_symbol": BULK_SYMBOL, "kda2.model": model})
        T.device_entry()
        tx = T.thread_id([NT])
        sm = T.alloc_shared((ROWS, ROW), "float32")
        reg = T.alloc_local((NI * KPL * NE,), "float32")
        for i in T.serial(NI, annotations={"kda2.access": "read"}):
            for s in T.serial(KPL if (v_first and strided) else 1):
                for e in T.vectorized(NE):
                    if all_k:
                        reg[i * NE + e] = sm[tx % 32 // CG * RPL + i, tx // 32 * VPW + tx % 32 % CG * CW + e]
                    elif v_first:
                        if strided:
                            reg[i * KPL + s] = sm[tx // 32 * VPW + i, tx % 32 + 32 * s]
                        else:
                            reg[i * NE + e] = sm[tx // 32 * VPW + i, tx % 32 * KPL + e]
                    else:
                        if strided:
                            reg[i * NE + e] = sm[tx % 32 + 32 * i, tx // 32 * VPW + e]
                        else:
                            reg[i * NE + e] = sm[tx % 32 * KPL + i, tx // 32 * VPW + e]
        # (the token loop updates the registers here)
        for i in T.serial(NI, annotations={"kda2.access": "write"}):
            for s in T.serial(KPL if (v_first and strided) else 1):
                for e in T.vectorized(NE):
                    if all_k:
                        sm[tx % 32 // CG * RPL + i, tx // 32 * VPW + tx % 32 % CG * CW + e] = reg[i * NE + e]
                    elif v_first:
                        if strided:
                            sm[tx // 32 * VPW + i, tx % 32 + 32 * s] = reg[i * KPL + s]
                        else:
                            sm[tx // 32 * VPW + i, tx % 32 * KPL + e] = reg[i * NE + e]
                    else:
                        if strided:
                            sm[tx % 32 + 32 * i, tx // 32 * VPW + e] = reg[i * NE + e]
                        else:
                            sm[tx % 32 * KPL + i, tx // 32 * VPW + e] = reg[i * NE + e]

    return kda2_bulk_stage
