"""`kda2.bank_pad`: a tvm.tirx PrimFunc pass that measures shared-memory bank conflicts and pads rows.

What the pass does, for every shared-memory buffer the PrimFunc allocates (``T.alloc_shared``):

1. Collects every load and store of the buffer together with its context: enclosing loops
   (serial loops are iterations, ``T.vectorized`` loops are the elements of one vector access),
   enclosing ``if`` guards, and the thread-index definitions (``T.thread_id`` / ``T.warp_id`` /
   ``T.lane_id``). An access is named by the nearest enclosing loop annotated
   ``{"kda2.access": name}``.
2. Evaluates the flat element offset (``buffer.layout.apply``) of every access for warp 0 and the
   last warp of the CTA, every lane and every loop iteration (numpy over the index expressions; guards mask
   inactive lanes), and the bank-conflict degree of each access under the model
   - 32 banks of 4 bytes; a 4-byte access is one phase of 32 lanes, an 8- or 16-byte access two
     phases of 16 lanes (ncu on the H200: a 16-byte access by 16 lanes to 256 distinct bytes is 2
     wavefronts, two distinct addresses read by a whole warp 2 in all);
   - the wavefronts of a phase are the largest number of *distinct* 4-byte words that fall into one
     bank (the same word twice is a broadcast and counts once); its degree is that relative to a
     conflict-free phase (a 16-byte half-warp phase needs 2 wavefronts at best), so 1 = conflict-free;
   - the degree of an access is the maximum over phases, loop iterations and those warps.
3. Tries the layouts the buffer allows (function attribute ``kda2.tiles``: buffer name -> "pad",
   "xor" or "fixed"; default "pad"). "pad": row pads (elements appended to the innermost dimension)
   that are multiples of the widest vector touching the buffer, so every vector access stays aligned
   (checked, not assumed). "xor": the tile cannot be padded (it arrives by whole-tile copies), so the
   candidates are the plain layout and the XOR swizzle of its 16-byte pieces by row (piece ^= row % 8).
   "fixed": only the layout as declared (its accesses are conflict-free by construction; the pass
   still measures them). Keeps the candidate with the fewest predicted wavefronts over all accesses
   (then the lowest worst degree, then the smallest pad) among those whose total shared-memory
   footprint fits the budget. The wavefronts of an access are the sum of its phases' degrees over its
   loop iterations: what ncu counts as shared-memory wavefronts (below).
4. Re-declares the buffer with the padded shape (``tirx.decl_buffer``) and repoints every use
   (``structural_map`` over ``tvm.ir.Var``). Padding the *shape* sizes the allocation correctly;
   padding through a strided ``TileLayout`` would hit the 0.27 bug where the allocation is sized
   from the shape product rather than the layout span.
5. Re-analyses the rewritten function and records everything under the function attribute
   ``kda2.bank_pad`` (so the after-dump shows the decision and the plan reads it from the IR).

Checked on the H200 (2026-11-29, ncu, kernels compiled by tvm.compile from the before/after
PrimFuncs of four variants): the measured shared-memory wavefronts equalled
sum(instructions x phases x degree) of this model exactly, e.g. K=128/W=4/VPW=8 strided loads
1152 -> 256 wavefronts (read degree 8 -> 1), blocked 1152 -> 640 (8 -> 4), VPW=2 160 -> 128.

It never raises for an over-budget function (an exception raised inside a pass reaches the caller
as a bare RuntimeError); it records ``fits: False`` and leaves the function unpadded, and the
caller raises :class:`kda2.tir.errors.TirBudgetError`.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from kda2.plan.smem import MAX_ROW_PAD
from kda2.tir.errors import BankModelError

PASS_NAME = "kda2.bank_pad"
ATTR = "kda2.bank_pad"
ACCESS_ANNOTATION = "kda2.access"
#: Loop annotation of an access whose hardware phases are fixed by the instruction: ldmatrix serves each
#: 8x8 matrix (8 lanes' 16-byte row addresses) as its own phase, unlike a 16-byte load's half-warp phases.
PHASE_ANNOTATION = "kda2.phase_lanes"
NUM_BANKS = 32
BANK_BYTES = 4
MAX_ACCESS_BYTES = 16          # widest per-thread shared access (LDS.128 / STS.128)
DEFAULT_MAX_PAD = MAX_ROW_PAD    # elements; candidates are multiples of the widest vector up to this
SHARED_SCOPES = ("shared", "shared.dyn")

# ScopeIdDef.scope values (tvm/tirx/exec_scope.py, _SCOPE_BINDING_TO_PARENT_CUR)
_CTA_WARP, _WARP_THREAD, _CTA_THREAD = 4, 6, 7


# --------------------------------------------------------------------------------------------
# expression evaluation (numpy, vectorised over warps x lanes x loop iterations)
# --------------------------------------------------------------------------------------------

def _truncdiv(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -q, q)


def _truncmod(a, b):
    return a - _truncdiv(a, b) * b


_BINARY = {
    "Add": operator.add, "Sub": operator.sub, "Mul": operator.mul,
    "FloorDiv": np.floor_divide, "FloorMod": np.mod, "Div": _truncdiv, "Mod": _truncmod,
    "Min": np.minimum, "Max": np.maximum,
    "LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
    "EQ": np.equal, "NE": np.not_equal, "And": np.logical_and, "Or": np.logical_or,
}


def evaluate(expr: Any, env: dict) -> Any:
    """Evaluate an integer/boolean TIR expression; ``env`` maps Var -> int or numpy array."""
    kind = type(expr).__name__
    if kind == "IntImm":
        return int(expr.value)
    if kind == "Var":
        try:
            return env[expr]
        except KeyError:
            raise BankModelError(f"free variable {expr} in a shared-memory index") from None
    op = _BINARY.get(kind)
    if op is not None:
        return op(evaluate(expr.a, env), evaluate(expr.b, env))
    if kind == "Not":
        return np.logical_not(evaluate(expr.a, env))
    if kind == "Cast":
        return evaluate(expr.value, env)
    if kind == "Select":
        return np.where(evaluate(expr.condition, env), evaluate(expr.true_value, env),
                        evaluate(expr.false_value, env))
    if kind == "Call" and str(getattr(expr.op, "name", "")).endswith("if_then_else"):
        cond, a, b = expr.args
        return np.where(evaluate(cond, env), evaluate(a, env), evaluate(b, env))
    raise BankModelError(f"cannot evaluate {kind} in a shared-memory index: {expr}")


# --------------------------------------------------------------------------------------------
# collection
# --------------------------------------------------------------------------------------------

@dataclass
class Access:
    name: str
    kind: str                         # "load" | "store"
    buffer: Any                       # the buffer Var
    indices: list
    loops: list                       # enclosing For nodes, outermost first
    guards: list                      # enclosing conditions that must hold
    lets: list                        # (var, value) bindings in scope, outermost first
    phase_lanes: int = 0              # lanes per phase set by the access (ldmatrix: 8, one 8x8 matrix each)


@dataclass
class Collected:
    shared: list = field(default_factory=list)          # shared buffer Vars, in allocation order
    accesses: list = field(default_factory=list)
    thread_vars: dict = field(default_factory=dict)     # Var -> ("thread"|"warp"|"lane"|"other", extent)


def _annotation(loop) -> str | None:
    ann = loop.annotations
    if ann is not None and ACCESS_ANNOTATION in ann:
        return str(ann[ACCESS_ANNOTATION])
    return None


def collect(func: tirx.PrimFunc) -> Collected:
    """Shared allocations, their accesses (with loop/guard context) and the thread-index vars."""
    out = Collected()
    shared_ids: set = set()
    names_seen: dict[str, int] = {}

    def buffer_is_shared(buf) -> bool:
        return any(buf.same_as(b) for b in out.shared)

    def add(kind, buf, indices, loops, guards, lets):
        name = next((n for n in (_annotation(lp) for lp in reversed(loops)) if n), None)
        name = name or f"{kind}{len(out.accesses)}"
        count = names_seen.get(name, 0)
        names_seen[name] = count + 1
        if count:
            name = f"{name}#{count + 1}"
        phase = next((int(lp.annotations[PHASE_ANNOTATION]) for lp in reversed(loops)
                      if lp.annotations is not None and PHASE_ANNOTATION in lp.annotations), 0)
        out.accesses.append(Access(name, kind, buf, list(indices), list(loops), list(guards),
                                   list(lets), phase))

    def scan_expr(expr, loops, guards, lets):
        found = []
        tvm_ffi.structural_walk(expr, [(tvm.ir.TensorLoad, found.append)], order="pre")
        for load in found:
            if buffer_is_shared(load.source):
                add("load", load.source, load.indices, loops, guards, lets)

    def visit(stmt, loops, guards, lets):
        kind = type(stmt).__name__
        if kind == "SeqStmt":
            local_lets = list(lets)
            for s in stmt.seq:
                if type(s).__name__ == "Bind":
                    local_lets.append((s.var, s.value))
                visit(s, loops, guards, local_lets)
        elif kind == "For":
            visit(stmt.body, loops + [stmt], guards, lets)
        elif kind == "IfThenElse":
            scan_expr(stmt.condition, loops, guards, lets)
            visit(stmt.then_case, loops, guards + [stmt.condition], lets)
            if stmt.else_case is not None:
                visit(stmt.else_case, loops, guards + [tirx.Not(stmt.condition)], lets)
        elif kind == "LetStmt":
            scan_expr(stmt.value, loops, guards, lets)
            visit(stmt.body, loops, guards, lets + [(stmt.var, stmt.value)])
        elif kind == "AllocBuffer":
            buf = stmt.buffer
            if buf.scope() in SHARED_SCOPES and id(buf) not in shared_ids:
                shared_ids.add(id(buf))
                out.shared.append(buf)
        elif kind == "ScopeIdDefStmt":
            d = getattr(stmt, "def")
            role = {_CTA_THREAD: "thread", _CTA_WARP: "warp", _WARP_THREAD: "lane"}.get(
                int(d.scope), "other")
            if len(d.def_ids) != 1 and role != "other":
                raise BankModelError(f"multi-dimensional thread index {d} is not modelled")
            extents = list(d.extents) if d.extents is not None else [None] * len(d.def_ids)
            for var, ext in zip(d.def_ids, extents):
                out.thread_vars[var] = (role, None if ext is None else int(ext))
        elif kind == "BufferStore":
            for e in list(stmt.indices) + [stmt.value]:
                scan_expr(e, loops, guards, lets)
            if buffer_is_shared(stmt.buffer):
                add("store", stmt.buffer, stmt.indices, loops, guards, lets)
        elif kind in ("Evaluate", "Bind"):
            scan_expr(stmt.value, loops, guards, lets)
        elif kind in ("AttrStmt", "DeclBuffer"):
            if getattr(stmt, "body", None) is not None:
                visit(stmt.body, loops, guards, lets)
        else:
            body = getattr(stmt, "body", None)
            if body is not None:
                visit(body, loops, guards, lets)
            else:
                hits = []
                tvm_ffi.structural_walk(stmt, [(tvm.ir.TensorLoad, hits.append)])
                if any(buffer_is_shared(h.source) for h in hits):
                    raise BankModelError(f"shared access inside unsupported statement {kind}")

    visit(func.body, [], [], [])
    return out


# --------------------------------------------------------------------------------------------
# the bank model
# --------------------------------------------------------------------------------------------

@dataclass
class Prepared:
    """An access evaluated over warps x lanes x iterations, independent of the buffer's shape."""
    access: Access
    index_values: list                # one broadcastable int array per buffer dimension
    mask: np.ndarray                  # full shape, bool
    n_iter_axes: int                  # axes after (warp, lane) that are iterations
    vec_elems: int                    # elements of one vector access (product of vector axes)
    shape: tuple                      # (sampled warps, 32, *iteration extents, *vector extents)


def sampled_warps(col: Collected) -> list[int]:
    """The warps the model evaluates: warp 0 and the last warp of the CTA.

    In the staging models the warps differ only by an offset (their own columns, their share of
    the cooperative loop), so the first and the last warp cover the bank patterns; evaluating
    only these two keeps the pass well under a millisecond per access even at 8 warps. The tests
    cross-check the result against an exhaustive all-warps brute force.
    """
    warps = 1
    for role, ext in col.thread_vars.values():
        if role == "thread" and ext is not None:
            warps = max(warps, -(-ext // 32))
        elif role == "warp" and ext is not None:
            warps = max(warps, ext)
    return sorted({0, warps - 1})


def prepare(access: Access, col: Collected) -> Prepared:
    warp_ids = sampled_warps(col)
    tvars = col.thread_vars
    iter_loops = [lp for lp in access.loops if int(lp.kind) != int(tirx.ForKind.VECTORIZED)]
    vec_loops = [lp for lp in access.loops if int(lp.kind) == int(tirx.ForKind.VECTORIZED)]
    loops = iter_loops + vec_loops
    extents = []
    for lp in loops:
        try:
            extents.append(int(lp.extent))
        except Exception:  # noqa: BLE001 - symbolic extent
            raise BankModelError(f"loop {lp.loop_var} has a non-constant extent") from None
    ndim = 2 + len(loops)
    shape = (len(warp_ids), 32, *extents)

    def axis(values, ax):
        s = [1] * ndim
        s[ax] = len(values)
        return np.asarray(values, dtype=np.int64).reshape(s)

    w = axis(warp_ids, 0)
    lane = axis(range(32), 1)
    env: dict = {}
    for var, (role, ext) in tvars.items():
        if role == "thread":
            env[var] = w * 32 + lane
        elif role == "warp":
            env[var] = w
        elif role == "lane":
            env[var] = lane
        else:                          # cta / cluster ids: identical for the whole CTA
            env[var] = 0
    guards = []
    for ax, lp in enumerate(loops, start=2):
        lo = int(lp.min)
        step = 1 if lp.step is None else int(lp.step)
        env[lp.loop_var] = axis(range(lo, lo + step * extents[ax - 2], step), ax)
    for var, value in access.lets:
        env[var] = evaluate(value, env)
    for var, (role, ext) in tvars.items():          # threads beyond the launched extent are idle
        if role == "thread" and ext is not None and ext % 32:
            guards.append(env[var] < ext)
    index_values = [np.asarray(evaluate(ix, env)) for ix in access.indices]
    mask = np.ones(shape, dtype=bool)
    for g in access.guards:
        mask &= np.broadcast_to(np.asarray(evaluate(g, env), dtype=bool), shape)
    for g in guards:
        mask &= np.broadcast_to(g, shape)
    vec_elems = int(np.prod([int(lp.extent) for lp in vec_loops])) if vec_loops else 1
    return Prepared(access, index_values, mask, len(iter_loops), vec_elems, shape)


def flat_offsets(prep: Prepared, buffer) -> np.ndarray:
    """Flat element offsets of every (warp, lane, iteration, element) for ``buffer``'s layout."""
    shape = [int(s) for s in buffer.shape]
    dims = [tirx.Var(f"i{d}", "int32") for d in range(len(shape))]
    offset = buffer.layout.apply(*dims, shape=shape)["m"]
    env = dict(zip(dims, prep.index_values))
    return np.broadcast_to(np.asarray(evaluate(offset, env), dtype=np.int64), prep.shape)


@dataclass
class Degree:
    degree: int
    vector_elems: int                 # elements per vector access as issued
    access_bytes: int
    aligned: bool
    wavefronts: int = 0               # sum of the phases' degrees over iterations and sampled warps
    instructions: int = 0             # warp-level instructions issued (sampled warps x iterations with a lane on)


def conflict_degree(prep: Prepared, offsets: np.ndarray, elem_bytes: int) -> Degree:
    """Worst bank-conflict degree of one access (see module docstring for the model)."""
    warps, lanes = prep.shape[0], prep.shape[1]
    iters = prep.shape[2:2 + prep.n_iter_axes]
    n_iter = int(np.prod(iters)) if iters else 1
    nvec = prep.vec_elems
    off = offsets.reshape(warps, lanes, n_iter, nvec)
    mask = prep.mask.reshape(warps, lanes, n_iter, nvec)

    # the vector loop is one access only if its elements are contiguous; else it is nvec accesses
    contiguous = bool(np.all((off - off[..., :1])[mask.all(axis=-1)]
                             == np.arange(nvec, dtype=np.int64)))
    if not contiguous:
        off = off.reshape(warps, lanes, n_iter * nvec, 1)
        mask = mask.reshape(warps, lanes, n_iter * nvec, 1)
        nvec = 1
    # wider than 16 bytes: issued as several 16-byte accesses
    chunk = max(1, min(nvec, MAX_ACCESS_BYTES // elem_bytes))
    if nvec > chunk:
        n_chunks = nvec // chunk
        off = off.reshape(warps, lanes, n_iter, n_chunks, chunk).reshape(
            warps, lanes, n_iter * n_chunks, chunk)
        mask = mask.reshape(warps, lanes, n_iter * n_chunks, chunk)
        n_iter, nvec = n_iter * n_chunks, chunk
    access_bytes = nvec * elem_bytes
    active_starts = off[..., 0][mask[..., 0]]
    aligned = bool(np.all(active_starts % nvec == 0))

    # 4-byte accesses: one phase of 32 lanes; 8- and 16-byte accesses: two half-warp phases (a 16-byte phase
    # needs at least two wavefronts when its 16 lanes touch 256 distinct bytes: degree 2 with no conflict).
    # Measured on the H200 (experiments/2026-11-30-tir-layouts): float4 reads of one row by a whole warp (two
    # distinct addresses) cost 2 wavefronts, not the 4 that quarter-warp phases would predict.
    lanes_per_phase = min(lanes, 32 if access_bytes <= BANK_BYTES else 16)
    if prep.access.phase_lanes:
        lanes_per_phase = prep.access.phase_lanes
    n_phase = lanes // lanes_per_phase
    # -> (warp, iteration, phase, lane-in-phase, element)
    off = off.reshape(warps, n_phase, lanes_per_phase, n_iter, nvec).transpose(0, 3, 1, 2, 4)
    mask = mask.reshape(warps, n_phase, lanes_per_phase, n_iter, nvec).transpose(0, 3, 1, 2, 4)
    groups = warps * n_iter * n_phase
    if groups == 0:  # loops that do not run (a model's access of another variant kind): no instruction, no cost
        return Degree(0, nvec, access_bytes, aligned, 0, 0)
    words = (off * elem_bytes // BANK_BYTES).reshape(groups, -1)
    mask = mask.reshape(groups, -1)
    instructions = int(mask.reshape(warps, n_iter, -1).any(axis=2).sum())   # groups are (warp, iteration, phase)
    if not mask.any():
        return Degree(0, nvec, access_bytes, aligned, 0, 0)
    # distinct words per phase: sort each phase's words (inactive lanes -> -1), keep first copies
    words = np.where(mask, words, -1)
    words.sort(axis=1)
    first = np.ones(words.shape, dtype=bool)
    first[:, 1:] = words[:, 1:] != words[:, :-1]
    keep = first & (words >= 0)
    group_id = np.broadcast_to(np.arange(groups, dtype=np.int64)[:, None], words.shape)[keep]
    per_bank = np.bincount(group_id * NUM_BANKS + words[keep] % NUM_BANKS, minlength=groups * NUM_BANKS)
    per_group = per_bank.reshape(groups, NUM_BANKS).max(axis=1)
    # the degree is relative to a conflict-free access: a 16-byte half-warp phase takes 2 wavefronts at best
    floor = max(1, lanes_per_phase * access_bytes // (NUM_BANKS * BANK_BYTES))
    degree = int(-(-per_group.max() // floor))
    return Degree(degree, nvec, access_bytes, aligned, int(per_group.sum()), instructions)


# --------------------------------------------------------------------------------------------
# the pass
# --------------------------------------------------------------------------------------------

def _elem_bytes(buffer) -> int:
    return tvm.runtime.DataType(str(buffer.dtype)).bits // 8


def _nbytes(shape, elem_bytes) -> int:
    return int(np.prod([int(s) for s in shape])) * elem_bytes


#: Bytes of one swizzled piece ("xor" layout): the 16-byte unit of ldmatrix rows and bulk/cp.async copies.
XOR_PIECE_BYTES = 16
#: Rows whose pieces the swizzle permutes: piece ^= row % XOR_ROWS (one 8-row ldmatrix phase).
XOR_ROWS = 8
TRANSFORMS = ("pad", "xor", "fixed")
TILES_ATTR = "kda2.tiles"


def xor_offsets(prep: Prepared, buffer) -> np.ndarray:
    """Flat element offsets under the XOR swizzle of 16-byte pieces by row (2-D buffers)."""
    shape = [int(s) for s in buffer.shape]
    piece = XOR_PIECE_BYTES // _elem_bytes(buffer)
    if len(shape) != 2 or shape[1] % (piece * XOR_ROWS):
        raise BankModelError(f"shared buffer {buffer.name}: an xor swizzle needs 2-D rows of a multiple of "
                             f"{XOR_ROWS} pieces of {XOR_PIECE_BYTES} bytes, got shape {shape}")
    row, col = (np.asarray(v, dtype=np.int64) for v in prep.index_values)
    off = row * shape[1] + (((col // piece) ^ (row % XOR_ROWS)) * piece + col % piece)
    return np.broadcast_to(off, prep.shape)


def analyse_buffer(buffer, preps: list[Prepared], swizzle: bool = False) -> dict[str, Degree]:
    eb = _elem_bytes(buffer)
    offs = xor_offsets if swizzle else flat_offsets
    return {p.access.name: conflict_degree(p, offs(p, buffer), eb) for p in preps}


def _transforms(func: tirx.PrimFunc) -> dict[str, str]:
    attr = func.attrs.get(TILES_ATTR) if func.attrs is not None else None
    out = {str(k): str(v) for k, v in (attr.items() if attr is not None else [])}
    bad = {k: v for k, v in out.items() if v not in TRANSFORMS}
    if bad:
        raise BankModelError(f"{TILES_ATTR}: unknown transforms {bad}; allowed {TRANSFORMS}")
    return out


def analyse(func: tirx.PrimFunc, swizzled: tuple = ()) -> dict:
    """Per shared buffer name: {access name: Degree} for the function as it stands (buffers named in
    `swizzled` under the XOR swizzle)."""
    col = collect(func)
    result = {}
    for buf in col.shared:
        preps = [prepare(a, col) for a in col.accesses if a.buffer.same_as(buf)]
        result[str(buf.name)] = analyse_buffer(buf, preps, str(buf.name) in swizzled)
    return result


def _worst(degrees: dict[str, Degree]) -> int:
    return max((d.degree for d in degrees.values()), default=0)


def _wavefronts(degrees: dict[str, Degree]) -> int:
    return sum(d.wavefronts for d in degrees.values())


def bank_pad(func: tirx.PrimFunc, smem_budget: int, enable: bool = True,
             max_pad: int = DEFAULT_MAX_PAD) -> tirx.PrimFunc:
    """The pass body: analyse, choose pads, rewrite, re-analyse, record (see module docstring)."""
    col = collect(func)
    if not col.shared:
        return func
    transforms = _transforms(func)
    names = {str(b.name) for b in col.shared}
    unknown = sorted(set(transforms) - names)
    if unknown:
        raise BankModelError(f"{TILES_ATTR} names buffers the function does not allocate: {unknown}")
    plans = []
    for buf in col.shared:
        if len(buf.shape) < 2:
            raise BankModelError(f"shared buffer {buf.name} is 1-D; row padding needs 2-D")
        preps = [prepare(a, col) for a in col.accesses if a.buffer.same_as(buf)]
        eb = _elem_bytes(buf)
        before = analyse_buffer(buf, preps)
        vec_max = max((d.vector_elems for d in before.values()), default=1)
        how = transforms.get(str(buf.name), "pad")
        shape = [int(s) for s in buf.shape]
        # candidate key: the pad (int) or "xor"; every candidate: (buffer, shape, degrees, aligned)
        cands: dict = {0: (buf, shape, before, all(d.aligned for d in before.values()))}
        if enable and how == "pad":
            for pad in range(vec_max, max_pad + 1, vec_max):
                new_shape = shape[:-1] + [shape[-1] + pad]
                cand = tirx.decl_buffer(new_shape, buf.dtype, str(buf.name), scope=buf.scope())
                degs = analyse_buffer(cand, preps)
                cands[pad] = (cand, new_shape, degs, all(d.aligned for d in degs.values()))
        elif enable and how == "xor":
            degs = analyse_buffer(buf, preps, swizzle=True)
            cands["xor"] = (buf, shape, degs, all(d.aligned for d in degs.values()))
        plans.append((buf, shape, eb, before, vec_max, cands, how))

    # choose per buffer; the budget covers all shared buffers together (pad 0 is always a candidate)
    running = sum(_nbytes(shape, eb) for _, shape, eb, *_ in plans)
    fits = running <= smem_budget
    chosen = []
    for buf, shape, eb, before, vec_max, cands, how in plans:
        own = _nbytes(shape, eb)
        ok = {p: c for p, c in cands.items()
              if c[3] and running - own + _nbytes(c[1], eb) <= smem_budget}
        pick = 0
        if fits and ok:
            pick = min(ok, key=lambda p: (_wavefronts(ok[p][2]), _worst(ok[p][2]), 0 if p == "xor" else p))
        chosen.append(pick)
        running += _nbytes(cands[pick][1], eb) - own

    body = func.body
    for (buf, *_rest), pick in zip(plans, chosen):
        if isinstance(pick, int) and pick:
            new = _rest[-2][pick][0]
            body = tvm_ffi.structural_map(
                body, [(tvm.ir.Var, lambda v, old=buf, new=new: new if v.same_as(old) else v)])
    out = func.with_body(body) if any(isinstance(p, int) and p for p in chosen) else func

    swizzled = tuple(str(b.name) for (b, *_r), p in zip(plans, chosen) if p == "xor")
    after = analyse(out, swizzled)
    record: dict = {"buffers": {}, "smem_budget": int(smem_budget), "fits": bool(fits)}
    total = 0
    for (buf, shape, eb, before, vec_max, cands, how), pick in zip(plans, chosen):
        name = str(buf.name)
        new_shape = cands[pick][1]
        total += _nbytes(new_shape, eb)
        record["buffers"][name] = {
            "shape_before": shape, "shape_after": new_shape, "pad": pick if isinstance(pick, int) else 0,
            "row_stride": new_shape[-1], "bytes": _nbytes(new_shape, eb),
            "transform": how, "swizzle": "xor" if pick == "xor" else "none",
            "vector_max": vec_max,
            "candidates": {str(p): _worst(c[2]) for p, c in cands.items() if c[3]},
            "candidate_wavefronts": {str(p): _wavefronts(c[2]) for p, c in cands.items() if c[3]},
            "misaligned": [str(p) for p, c in cands.items() if not c[3]],
            "conflicts_before": {a: d.degree for a, d in before.items()},
            "conflicts_after": {a: d.degree for a, d in after[name].items()},
            "wavefronts_before": {a: d.wavefronts for a, d in before.items()},
            "wavefronts_after": {a: d.wavefronts for a, d in after[name].items()},
            "instructions": {a: d.instructions for a, d in after[name].items()},
            "vector_widths": {a: d.vector_elems for a, d in before.items()},
        }
    record["smem_bytes"] = total
    return out.with_attr(ATTR, record)


def make_bank_pad_pass(smem_budget: int, enable: bool = True, max_pad: int = DEFAULT_MAX_PAD):
    """A `tvm.tirx.transform.PrimFuncPass` named ``kda2.bank_pad`` (see :func:`bank_pad`)."""

    def transform(func, mod, ctx):  # noqa: ARG001 - PrimFuncPass signature
        return bank_pad(func, smem_budget, enable=enable, max_pad=max_pad)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name=PASS_NAME)


def to_python(obj: Any) -> Any:
    """tvm_ffi Map/Array/String (as read back from function attrs) -> plain JSON-able Python."""
    if isinstance(obj, (bool, int, float)) or obj is None:
        return obj
    if isinstance(obj, str):
        return str(obj)
    if hasattr(obj, "items"):
        return {str(k): to_python(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) or hasattr(obj, "__len__"):
        return [to_python(v) for v in obj]
    if type(obj).__name__ == "IntImm":
        return int(obj.value)
    return obj
