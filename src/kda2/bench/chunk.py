"""Chunk (prefill) KDA benchmark: kda2.chunk_kda vs FLA 0.6 `fla.ops.kda.chunk_kda`, same process, same inputs.

Shapes P1-P6 of docs/DESIGN.md §1.1 (H = HV, K = V = 128) in the configuration of FLA's KDA layer: bf16 q/k/v, raw
bf16 gate and raw bf16 beta with the gate (use_gate_in_kernel), q/k l2norm and beta sigmoid computed in
the kernels, fp32 initial state in and final state out, state_v_first as FLA's layer (default V-first);
P4 is varlen (cu_seqlens, with its host copy so neither side synchronises). Two gates:
- softplus: the unbounded Kimi-Linear gate `−exp(A_log)·softplus(g + dt_bias)`;
- lower_bound: `−5·sigmoid(exp(A_log)·(g + dt_bias))` with safe_gate=True (FLA's tensor-core path; kda2
  accepts it as FLA does, its kernels are exact for either gate).
Per shape × gate: median GPU time over --iters calls after warm-up (CUDA events, GPU spin before each
call so launch cost is excluded, kda2.bench.timing), speed-up, and once per shape × gate how far kda2's
outputs are from FLA's (relative L2 of o, must be < 1e-2). docs/DESIGN.md §1.1's FLA / FlashKDA figures and the
product targets are carried in the JSON as anchors (published, not measured by this run).
Each shape's tensors are allocated once and freed before the next (P5 is B1 T65536 H32).

Peers beside FLA: cuDNN-FE's fused Hopper KDA forward (`kda2.bench.cudnn_peer`, when nvidia-cudnn-frontend ≥ 1.32
is importable; --no-cudnn skips it; V-first states only), timed on the same inputs, kernel alone
(`cudnn`: its fp32 g / beta marshalled beforehand) and with that marshalling per call (`cudnn_with_prep`: the
bf16→fp32 casts, and for the softplus gate, which cuDNN lacks, the precomputed gate); its lower_bound gate is
its own safe-gate fusion, l2norm and β-sigmoid its fusion flags. Recorded per row: its P (pieces per sequence,
its heuristic), NaN/Inf counts of o and final state, relative L2 vs kda2 and vs FLA.
Shape sets: `p` (P1-P6, the default, both gates) and `k3` (K1-K10: cuDNN-FE's ten Kimi-K3 shapes (T_total, H, N),
N > 1 as N equal sequences packed varlen; the lower_bound gate unless --gates is given).
The run also measures the device-copy bandwidth (`copy`), from which each row's HBM floor is derived
(`roofline`: bytes of q, k, v, g, beta in, o out, states in + out over that bandwidth), and records
--step-us (time of one 64-token state step) for the serial-chain bound; `python -m kda2.bench.report
--roofline bench_chunk.json out.png` draws both against the measured times (kda2.bench.report).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import math
import os
import platform
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kda2.bench import host
from kda2.bench.report import floor_bytes, row_bounds
from kda2.bench.timing import Stats, Timer
from kda2.plan.model import MIXED_SEQLENS

K_DIM = V_DIM = 128   # the P shapes' head dim (docs/DESIGN.md §1.1)
#: --head-dim: K = V of the run. At another head dim each shape keeps its tokens and H·K (the bytes of q, k, v, g and
#: o per token): H is scaled by 128 / K (P1 H64 -> H128 at K = 64, H32 at K = 256).
HEAD_DIMS = (64, 128, 256)
AGREE_TOL = 1e-2
GATES = ("softplus", "lower_bound")
LAYOUTS = ("v_first", "k_first")
OPTIONS = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
               output_final_state=True)
GATE_OPTIONS = {"softplus": dict(lower_bound=None, safe_gate=False),
                "lower_bound": dict(lower_bound=-5.0, safe_gate=True)}
# --overlap -> kda2.chunk_kda(overlap=): the library's choice, asked for, refused (docs/DESIGN.md §1)
OVERLAP = {"auto": None, "on": True, "off": False}


@dataclass(frozen=True)
class Shape:
    id: str
    B: int
    T: int                       # per sequence (dense) or the packed total (varlen)
    H: int
    seqlens: tuple[int, ...] | None = None
    why: str = ""
    custom: bool = False         # named on the command line (B<b>T<t>H<h>): run as given at every head dim

    @property
    def cu_seqlens(self) -> list[int] | None:
        if self.seqlens is None:
            return None
        cu = [0]
        for n in self.seqlens:
            cu.append(cu[-1] + n)
        return cu

    @property
    def N(self) -> int:
        return len(self.seqlens) if self.seqlens else self.B

    @property
    def tokens(self) -> int:
        return self.B * self.T

    @property
    def label(self) -> str:
        if self.seqlens:
            return f"{self.id} varlen {list(self.seqlens)} H{self.H}"
        return f"{self.id} B{self.B} T{self.T} H{self.H}"


SHAPES = [
    Shape("P1", 1, 8192, 64, why="headline shape of FlashKDA / cuLA tables"),
    Shape("P2", 1, 16384, 32, why="Kimi-Linear layer, long prompt"),
    Shape("P3", 8, 2048, 32, why="batched prompts"),
    Shape("P4", 1, sum(MIXED_SEQLENS), 64, seqlens=MIXED_SEQLENS, why="mixed batch (FlashKDA's)"),
    Shape("P5", 1, 65536, 32, why="long context"),
    Shape("P6", 2, 2048, 8, why="thin tensor-parallel shard"),
]

#: cuDNN-FE's ten Kimi-K3 shapes (T_total, H, N) from its sm90 KDA engine's measurements; N > 1 is N equal-length
#: sequences packed varlen (THD), as cuDNN runs them.
K3 = [(2048, 12, 1), (2048, 16, 1), (4096, 8, 1), (4096, 12, 1), (8192, 12, 4), (8192, 16, 1), (1024, 4, 1),
      (3072, 10, 1), (8192, 24, 1), (16384, 16, 8)]


def k3_shape(i: int, t_total: int, h: int, n: int) -> Shape:
    if t_total % n:
        raise ValueError(f"T_total {t_total} is not a multiple of N {n}")
    return Shape(f"K{i}", 1, t_total, h, seqlens=(t_total // n,) * n if n > 1 else None,
                 why=f"cuDNN-FE Kimi-K3 shape (T_total {t_total}, H {h}, N {n})")


K3_SHAPES = [k3_shape(i + 1, *x) for i, x in enumerate(K3)]
#: Few chains, long sequences: one prompt on a tensor-parallel shard of a few heads, where unsplit chains would
#: leave most SMs idle (the library's exact split, docs/DESIGN.md §1).
FEW_CHAIN_SHAPES = [
    Shape("F1", 1, 8192, 4, why="one prompt, Kimi-Linear's 32 heads over 8 GPUs"),
    Shape("F2", 1, 16384, 4, why="a longer prompt on the same shard"),
    Shape("F3", 1, 32768, 2, why="long prompt, 2 heads per GPU"),
    Shape("F4", 1, 65536, 1, why="long context, one head per GPU"),
]
ALL_SHAPES = SHAPES + K3_SHAPES + FEW_CHAIN_SHAPES
SHAPE_SETS = {"p": [s.id for s in SHAPES], "k3": [s.id for s in K3_SHAPES], "f": [s.id for s in FEW_CHAIN_SHAPES]}
K3_GATES = ("lower_bound",)


#: A shape named on the command line: B sequences of T tokens on H heads, e.g. B2T4096H16.
CUSTOM_FORM = "B<sequences>T<tokens>H<heads>"
_CUSTOM = re.compile(r"B(\d+)T(\d+)H(\d+)")


def custom_shape(token: str) -> Shape | None:
    """B<b>T<t>H<h> -> that dense batch (None when the token is not of that form); ValueError on a zero."""
    m = _CUSTOM.fullmatch(token)
    if not m:
        return None
    b, t, h = (int(x) for x in m.groups())
    if min(b, t, h) < 1:
        raise ValueError(f"shape {token!r}: sequences, tokens and heads must each be at least 1")
    return Shape(token, b, t, h, why="named on the command line", custom=True)


def resolve_shapes(tokens: list[str] | None) -> list[Shape]:
    """Shape ids, set names (p, k3, f, all) and shapes of the form B<b>T<t>H<h> -> shapes: the named ones in
    ALL_SHAPES order, then the custom ones as given; default the p set. ValueError on anything else."""
    tokens = tokens or ["p"]
    by_id = {s.id: s for s in ALL_SHAPES}
    want: set[str] = set()
    custom: list[Shape] = []
    for t in tokens:
        if t in by_id:  # before the set names: "K3" is a shape, "k3" the set of ten
            want.add(t)
        elif t.lower() == "all":
            want |= set(by_id)
        elif t.lower() in SHAPE_SETS:
            want |= set(SHAPE_SETS[t.lower()])
        elif (c := custom_shape(t)) is not None:
            if all(c.id != x.id for x in custom):
                custom.append(c)
        else:
            raise ValueError(f"unknown shape {t!r}; allowed: {list(by_id)}, a set {list(SHAPE_SETS)} / all, or "
                             f"{CUSTOM_FORM} (e.g. B2T4096H16)")
    return [s for s in ALL_SHAPES if s.id in want] + custom


def gates_for(s: Shape, gates: list[str] | None) -> list[str]:
    """--gates when given, else both for P and F shapes and the bounded gate for the K3 set."""
    if gates:
        return list(gates)
    return list(K3_GATES) if s.id.startswith("K") else list(GATES)

#: An earlier H200 run of FLA 0.6 and FlashKDA in one process (docs/DESIGN.md §1.1): H200, ms, median; raw gate, l2norm and β-sigmoid in kernel,
#: fp32 V-first states. Published figures from another run, NOT measured here.
ANCHORS = {
    "source": "earlier run on this NVIDIA H200 (FLA 0.6.0 Triton, FlashKDA 1ce47ea); docs/DESIGN.md §1.1",
    "measured_by_this_run": False,
    "ms": {
        "P1": {"fla_lower_bound": 1.749, "fla_softplus": 1.935, "flashkda_lower_bound": 1.197, "hbm_floor": 0.16},
        "P2": {"fla_lower_bound": 1.865, "fla_softplus": 2.049, "flashkda_lower_bound": 1.932, "hbm_floor": 0.16},
        "P3": {"fla_lower_bound": 1.852, "fla_softplus": 2.039, "flashkda_lower_bound": 0.800, "hbm_floor": 0.16},
        "P4": {"fla_lower_bound": 1.803, "fla_softplus": 1.999, "flashkda_lower_bound": 1.023, "hbm_floor": 0.16},
        "P5": {"fla_lower_bound": 7.303, "fla_softplus": 7.970, "flashkda_lower_bound": 7.614, "hbm_floor": 0.63},
        "P6": {"fla_lower_bound": 0.960, "fla_softplus": 1.404, "flashkda_lower_bound": 0.243, "hbm_floor": 0.01},
    },
    "target_softplus_ms": {"P1": 0.25, "P2": 0.29, "P3": 0.40, "P4": 0.35, "P5": 1.1, "P6": 0.10},
}


def anchor(shape_id: str, gate: str) -> dict[str, float | None]:
    a = ANCHORS["ms"].get(shape_id, {})
    return {"fla_ms": a.get(f"fla_{gate}"), "flashkda_ms": a.get("flashkda_lower_bound") if gate == "lower_bound"
            else None, "hbm_floor_ms": a.get("hbm_floor"), "target_ms": ANCHORS["target_softplus_ms"].get(shape_id)}


def at_head_dim(s: Shape, k: int) -> Shape:
    """The shape scaled to head dim k = K = V: the same tokens and H·K (HEAD_DIMS)."""
    if k == K_DIM or s.custom:
        return s
    h = max(1, s.H * K_DIM // k)
    return Shape(s.id, s.B, s.T, h, seqlens=s.seqlens, why=f"{s.why}; H {s.H} -> {h} at K = V = {k}")


def set_bytes(s: Shape, K: int = K_DIM, V: int = V_DIM) -> int:
    """Bytes of one input set + its outputs: q, k, v, g (bf16), beta (bf16), o (bf16), h0 + ht (fp32)."""
    return floor_bytes(s.tokens, s.H, s.N, K, V)


def n_sets(s: Shape, l2_bytes: int, K: int = K_DIM, V: int = V_DIM) -> int:
    """Rotating input sets so that consecutive calls do not find their inputs in L2 (1..4)."""
    return max(1, min(4, math.ceil(2 * l2_bytes / set_bytes(s, K, V))))


# ---- inputs and the two implementations ----------------------------------------------------------

def make_sets(torch, s: Shape, R: int, v_first: bool, seed: int, K: int = K_DIM, V: int = V_DIM,
              device: str = "cuda") -> tuple[list, dict]:
    """R input sets of one shape, and the gate parameters and offsets every set shares. The shared draw has its
    own generator, so a shape's gate (which decides how much of the prep takes the exact path: DESIGN §1) is the
    same whatever R is — R follows the GPU's L2 and the head dim (n_sets)."""
    gens = [torch.Generator(device=device).manual_seed(seed + (i << 40)) for i in (0, 1)]

    def randn(*shape, dtype=torch.bfloat16, gen=0):
        return torch.randn(*shape, generator=gens[gen], device=device, dtype=torch.float32).to(dtype)

    B, T, H = s.B, s.T, s.H
    sshape = (s.N, H, V, K) if v_first else (s.N, H, K, V)
    cu = s.cu_seqlens
    shared = dict(A_log=randn(H, dtype=torch.float32, gen=1) * 0.5, dt_bias=randn(H * K, dtype=torch.float32, gen=1),
                  cu_seqlens=None if cu is None else torch.tensor(cu, dtype=torch.int64, device=device),
                  cu_seqlens_cpu=None if cu is None else torch.tensor(cu, dtype=torch.int64),
                  sshape=sshape)
    sets = [dict(q=randn(B, T, H, K), k=randn(B, T, H, K), v=randn(B, T, H, V), g=randn(B, T, H, K),
                 beta=randn(B, T, H), h0=randn(*sshape, dtype=torch.float32) * 0.1) for _ in range(R)]
    return sets, shared


class Ours:
    name = "kda2"
    entry = "kda2.chunk_kda(out=, final_state_out=)"

    def __init__(self, lib, overlap: bool | None = None):
        import kda2

        self.lib, self.fn, self.overlap = lib, kda2.chunk_kda, overlap

    def call(self, sets, shared, gate: str, v_first: bool, outs: list | None, hts: list | None) -> Callable[[int], Any]:
        fn, lib, gopt, ov = self.fn, self.lib, GATE_OPTIONS[gate], self.overlap

        def run(i):
            x = sets[i]
            return fn(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=v_first,
                      cu_seqlens=shared["cu_seqlens"], A_log=shared["A_log"], dt_bias=shared["dt_bias"], library=lib,
                      overlap=ov,
                      cu_seqlens_cpu=shared["cu_seqlens_cpu"], out=None if outs is None else outs[i],
                      final_state_out=None if hts is None else hts[i], **gopt, **OPTIONS)
        return run


class FLA:
    """FLA 0.6 public chunk_kda, Triton path (FLA_FLASH_KDA=0: FlashKDA is a separate anchor)."""

    name = "fla"
    entry = "fla.ops.kda.chunk_kda (FLA_FLASH_KDA=0)"

    def __init__(self):
        os.environ.setdefault("FLA_FLASH_KDA", "0")
        from fla.ops.kda import chunk_kda

        self.fn = chunk_kda
        self.flash_kda_env = os.environ.get("FLA_FLASH_KDA")

    def call(self, sets, shared, gate: str, v_first: bool, outs=None, hts=None) -> Callable[[int], Any]:
        fn, gopt = self.fn, GATE_OPTIONS[gate]

        def run(i):
            x = sets[i]
            return fn(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["h0"], state_v_first=v_first,
                      cu_seqlens=shared["cu_seqlens"], cu_seqlens_cpu=shared["cu_seqlens_cpu"], A_log=shared["A_log"],
                      dt_bias=shared["dt_bias"], **gopt, **OPTIONS)
        return run


def rel_l2(torch, x, ref) -> float:
    """‖x − ref‖ / ‖ref‖ on the GPU, float64 accumulation."""
    d = x.float() - ref.float()
    num = torch.linalg.vector_norm(d, dtype=torch.float64).item()
    den = torch.linalg.vector_norm(ref.float(), dtype=torch.float64).item()
    return num / den if den else num


def agreement(torch, ours: Ours, fla: FLA | None, sets, shared, gate: str, v_first: bool,
              keep: dict | None = None) -> dict:
    """kda2 vs FLA on set 0 (also the untimed first call of both: module loads, Triton compiles). `keep` gets
    both outputs (kda2, fla: (o, final state)) for the peers' comparison."""
    res: dict[str, Any] = {"tol": AGREE_TOL}
    o1, h1 = ours.call(sets, shared, gate, v_first, None, None)(0)
    torch.cuda.synchronize()
    if keep is not None:
        keep["kda2"] = (o1, h1)
    res["kda2_nonfinite"] = int((~o1.isfinite()).sum().item()) + int((~h1.isfinite()).sum().item())
    res["ok"] = res["kda2_nonfinite"] == 0  # ok: kda2 finite and, where FLA ran finite, o within AGREE_TOL of FLA's
    if fla is None:
        return res
    o2, h2 = fla.call(sets, shared, gate, v_first)(0)
    torch.cuda.synchronize()
    if keep is not None:
        keep["fla"] = (o2, h2)
    res["fla_nonfinite"] = int((~o2.isfinite()).sum().item()) + int((~h2.isfinite()).sum().item())
    if res["fla_nonfinite"]:
        res["note"] = "FLA's output has NaN/Inf: agreement not judged"
        return res
    res["o_rel_l2_kda2_vs_fla"] = rel_l2(torch, o1, o2)
    res["state_rel_l2_kda2_vs_fla"] = rel_l2(torch, h1, h2)
    res["ok"] = bool(res["ok"] and res["o_rel_l2_kda2_vs_fla"] < AGREE_TOL)
    return res


def nonfinite(torch, x) -> int:
    return int((~x.isfinite()).sum().item())


def bench_cudnn(torch, timer: Timer, cudnn, s: Shape, sets, shared, gate: str, v_first: bool, iters: int,
                warmup: int, keep: dict) -> tuple[dict, dict | None]:
    """cuDNN-FE's fused kernel on the same inputs: (row["cudnn"], row["cudnn_with_prep"]). The first call (untimed)
    compiles its kernel with NVRTC unless the cubin is cached; its outputs are compared with kda2's and FLA's."""
    import time

    from kda2.bench import cudnn_peer

    why = cudnn_peer.check_inputs(sets, v_first)
    if why:
        return {"skipped": why}, None
    m = cudnn.marshal(torch, sets, shared, gate, s)
    res: dict[str, Any] = {"P": m["P"], "grid": [m["H"], m["N"] * m["P"]], "flags": m["flags"],
                           "gate_mode": cudnn_peer.GATE_MODES[gate]}
    t0 = time.perf_counter()
    o, ht = cudnn.call(torch, sets, shared, m)(0)
    torch.cuda.synchronize()
    res["first_call_s"] = round(time.perf_counter() - t0, 3)
    res["nonfinite_o"], res["nonfinite_state"] = nonfinite(torch, o), nonfinite(torch, ht)
    for ref in ("kda2", "fla"):
        if ref in keep:
            ro, rh = keep[ref]
            res[f"o_rel_l2_vs_{ref}"] = rel_l2(torch, o.reshape(ro.shape), ro)
            res[f"state_rel_l2_vs_{ref}"] = rel_l2(torch, ht, rh)
    del o, ht
    st: Stats = timer.kernel(cudnn.call(torch, sets, shared, m), len(sets), iters, warmup=warmup)
    res.update(ms_median=st.median_ms, ms_p10=st.p10_ms, ms_p90=st.p90_ms, reps=st.n)
    st = timer.kernel(cudnn.call_with_prep(torch, sets, shared, m), len(sets), iters, warmup=warmup)
    prep = {"ms_median": st.median_ms, "ms_p10": st.p10_ms, "ms_p90": st.p90_ms, "reps": st.n,
            "what": "per call: g.float() (+ the softplus-gate expression for softplus), beta.float(), then the kernel"}
    del m
    return res, prep


# ---- one shape ------------------------------------------------------------------------------------

def route_of(lib, s: Shape, v_first: bool) -> dict | None:
    """The dispatch row the library routes this shape to (variant, bucket, batch class): which kernels a row timed.
    (Whether the launch overlaps the state pass with the prep is the library's choice at launch: DESIGN §1.)"""
    if lib is None:
        return None
    row = lib.route(v_first, max(s.seqlens or (s.T,)), s.N * s.H)
    return None if row is None else {k: row.get(k) for k in ("variant", "bucket", "class", "routed_by")}


def bench_shape(torch, timer: Timer, ours: Ours, fla: FLA | None, s: Shape, gates: list[str], layout: str,
                iters: int, warmup: int, l2: int, cudnn=None, bounds: dict | None = None, K: int = K_DIM,
                a_log: float | None = None) -> list[dict]:
    v_first = layout == "v_first"
    R = n_sets(s, l2, K, K)
    sets, shared = make_sets(torch, s, R, v_first, seed=4321 + s.tokens + s.H, K=K, V=K)
    if a_log is not None:   # --a-log: every head's decay scale, for every implementation alike
        shared["A_log"] = torch.full_like(shared["A_log"], a_log)
    outs = [torch.empty_like(x["v"]) for x in sets]
    hts = [torch.empty_like(x["h0"]) for x in sets]
    rows = []
    for gate in gates:
        row: dict[str, Any] = dict(id=s.id, label=s.label, gate=gate, B=s.B, T=s.T, tokens=s.tokens, H=s.H, HV=s.H,
                                   K=K, V=K, cu_seqlens=s.cu_seqlens, N=s.N, layout=layout, sets=R,
                                   anchor=anchor(s.id, gate) if K == K_DIM
                                   else dict.fromkeys(anchor(s.id, gate)))  # the anchors are K = 128 figures
        row["route"] = route_of(getattr(ours, "lib", None), s, v_first)
        keep: dict[str, Any] = {}
        try:
            row["agreement"] = agreement(torch, ours, fla, sets, shared, gate, v_first, keep)
        except Exception as exc:  # noqa: BLE001 - recorded; the timings may still run
            row["agreement"] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=4)}
            torch.cuda.synchronize()
        for impl in (ours, fla):
            if impl is None:
                continue
            try:
                fn = impl.call(sets, shared, gate, v_first, outs, hts)
                st: Stats = timer.kernel(fn, R, iters, warmup=warmup)
                row[impl.name] = {"ms_median": st.median_ms, "ms_p10": st.p10_ms, "ms_p90": st.p90_ms, "reps": st.n}
            except Exception as exc:  # noqa: BLE001 - one failing implementation must not lose the rest
                row[impl.name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=4)}
                torch.cuda.synchronize()
        if cudnn is not None:
            try:
                row["cudnn"], prep = bench_cudnn(torch, timer, cudnn, s, sets, shared, gate, v_first, iters, warmup,
                                                 keep)
                if prep is not None:
                    row["cudnn_with_prep"] = prep
            except Exception as exc:  # noqa: BLE001 - a peer's failure is recorded, never fatal
                row["cudnn"] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=6)}
                torch.cuda.synchronize()
        keep.clear()
        k, f = row.get("kda2", {}), row.get("fla", {})
        if "ms_median" in k and "ms_median" in f:
            row["speedup"] = f["ms_median"] / k["ms_median"]
        row["roofline"] = row_bounds(row, **(bounds or {}))
        rows.append(row)
        _print_row(row)
    del sets, shared, outs, hts
    release = getattr(sys.modules.get("kda2.runtime.chunk"), "release_workspaces", None)
    if release is not None:
        release()
    torch.cuda.empty_cache()
    return rows


# ---- report ---------------------------------------------------------------------------------------

def _ms(d: dict | None) -> str:
    return "–" if not d or d.get("ms_median") is None else f"{d['ms_median']:.3f}"


def _num(x: float | None, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def markdown_table(result: dict) -> str:
    dev, ver, cfg = result.get("device", {}), result.get("versions", {}), result.get("config", {})
    lines = [
        f"Chunk KDA prefill on {dev.get('name', '?')} ({result.get('date', '?')}; torch {ver.get('torch', '?')}, "
        f"FLA {ver.get('fla-core', 'n/a')} Triton path). K = V = {cfg.get('K', 128)}"
        f"{' (H scaled by 128/K: same tokens and H·K as the P shapes)' if cfg.get('K', 128) != 128 else ''}, H = HV, bf16 q/k/v, raw bf16 gate and beta with "
        f"the gate, q/k l2norm and β-sigmoid in kernel, fp32 initial + final state ({cfg.get('layout', '?')}). "
        f"Median GPU time per call over {cfg.get('iters', '?')} calls (CUDA events). Anchor and target columns are "
        "docs/DESIGN.md §1.1 figures (FLA 0.6 on this H200 in an earlier run; product target for the softplus gate), not "
        "measured here.",
        "",
        "| shape | gate | kda2 ms | FLA 0.6 ms | speed-up | FLA anchor ms | target ms | o rel L2 kda2 vs FLA |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result.get("rows", []):
        a, ag = r.get("anchor", {}), r.get("agreement", {})
        sp = f"{r['speedup']:.2f}×" if r.get("speedup") else "–"
        agree = _num(ag.get("o_rel_l2_kda2_vs_fla"), ".1e")
        if ag.get("ok") is False:
            agree += " **(> 1e-2)**"
        target = a.get("target_ms") if r["gate"] == "softplus" else None
        lines.append(f"| {r['label']} | {r['gate']} | {_ms(r.get('kda2'))} | {_ms(r.get('fla'))} | {sp} | "
                     f"{_num(a.get('fla_ms'), '.3f')} | {_num(target, '.2f')} | {agree} |")
    peer = [r for r in result.get("rows", []) if r.get("cudnn")]
    if peer:
        lines += ["", cudnn_table(result)]
    if result.get("error"):
        lines += ["", f"The run failed: {result['error']}"]
    fla = result.get("fla", {})
    if not fla.get("available", False) and not result.get("error"):
        lines += ["", f"FLA was not measured: {fla.get('error', 'unknown reason')}."]
    cd = result.get("cudnn")
    if cd is not None and not cd.get("available", False) and not result.get("error"):
        lines += ["", f"cuDNN-FE was not measured: {cd.get('error', 'unknown reason')}."]
    for r in result.get("rows", []):
        for what in ("kda2", "fla", "cudnn"):
            if "error" in r.get(what, {}):
                lines.append(f"- {r['id']} {r['gate']} {what}: ERROR {r[what]['error']}")
        if "error" in r.get("agreement", {}):
            lines.append(f"- {r['id']} {r['gate']} agreement check: ERROR {r['agreement']['error']}")
    for n in result.get("notes", []):
        lines.append(f"- note: {n}")
    return "\n".join(lines)


def cudnn_table(result: dict) -> str:
    """The cuDNN-FE peer per row: kernel time, time with its input marshalling, P, NaN/Inf, distance to kda2 / FLA."""
    lines = ["cuDNN-FE fused Hopper KDA forward (`cudnn.linear_attention.hopper.cuda_host.launch`) on the same inputs: "
             "\"kernel\" with fp32 g / beta marshalled beforehand, \"+ prep\" with that marshalling per call (softplus: "
             "the gate precomputed in fp32 by a torch expression, cuDNN has no softplus gate; lower_bound: its own "
             "safe-gate fusion on an fp32 copy of the raw gate). P = its pieces per sequence.",
             "",
             "| shape | gate | cuDNN kernel ms | cuDNN + prep ms | kda2 ms | P | NaN/Inf o, state | o rel L2 vs kda2 | "
             "o rel L2 vs FLA | state rel L2 vs kda2 |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in result.get("rows", []):
        c = r.get("cudnn")
        if not c:
            continue
        if "error" in c or "skipped" in c:
            lines.append(f"| {r['label']} | {r['gate']} | {'ERROR' if 'error' in c else 'skipped'} | | | | | | | |")
            continue
        bad = c.get("nonfinite_o", 0) + c.get("nonfinite_state", 0)
        lines.append(f"| {r['label']} | {r['gate']} | {_ms(c)} | {_ms(r.get('cudnn_with_prep'))} | {_ms(r.get('kda2'))} | "
                     f"{c.get('P', '–')} | {c.get('nonfinite_o', '–')}, {c.get('nonfinite_state', '–')}"
                     f"{' **non-finite**' if bad else ''} | {_num(c.get('o_rel_l2_vs_kda2'), '.1e')} | "
                     f"{_num(c.get('o_rel_l2_vs_fla'), '.1e')} | {_num(c.get('state_rel_l2_vs_kda2'), '.1e')} |")
    return "\n".join(lines)


def chart(result: dict, path: Path) -> str | None:
    """PNG bar chart (ms per call, log scale; docs/DESIGN.md §1.1 target as a marker). Returns a note when it cannot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no PNG chart: matplotlib is not importable ({exc})"
    impls = [("kda2", "kda2", "#1f77b4"), ("fla", "FLA 0.6 (measured)", "#ff7f0e"),
             ("cudnn", "cuDNN-FE kernel (measured)", "#2ca02c")]
    impls = [i for i in impls if any("ms_median" in (r.get(i[0]) or {}) for r in result.get("rows", []))]
    rows = [r for r in result.get("rows", []) if any("ms_median" in (r.get(i[0]) or {}) for i in impls)]
    if not rows:
        return "no PNG chart: no timed rows"
    x = list(range(len(rows)))
    w = 0.8 / len(impls)
    fig, ax = plt.subplots(figsize=(max(8, 1.2 * len(rows)), 5))
    for j, (name, label, color) in enumerate(impls):
        off = (j - (len(impls) - 1) / 2) * w
        ax.bar([i + off for i in x], [(r.get(name) or {}).get("ms_median") or 0 for r in rows], w, label=label,
               color=color)
    tx = [(i, r["anchor"]["target_ms"]) for i, r in zip(x, rows) if r["gate"] == "softplus" and r["anchor"].get("target_ms")]
    if tx:
        ax.scatter([i for i, _ in tx], [t for _, t in tx], marker="_", s=600, color="k", zorder=3,
                   label="target (docs/DESIGN.md §1.1, softplus)")
    ax.set_yscale("log")
    ax.set_ylabel("ms per call (median)")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['id']}\n{r['gate']}" for r in rows], fontsize=8)
    ax.set_title(f"Chunk KDA prefill, {result.get('device', {}).get('name', '?')} "
                 f"({result.get('config', {}).get('layout', '?')} state)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# ---- the run --------------------------------------------------------------------------------------

def _chunk_manifests() -> list[Path]:
    from kda2.runtime import loader

    return [p for p in loader.find_manifests() if loader._family(p) == "chunk"]


def pick_library(library: str | None, k: int = K_DIM):
    """--library, else $KDA2_CHUNK_LIBRARY, else $KDA2_LIBRARY if it is a chunk build, else the one chunk-family
    spec under the build directory that runs the FLA-layer configuration (K=V=k, both gates, l2norm, β-sigmoid)."""
    from kda2.runtime import load

    for cand in (library, os.environ.get("KDA2_CHUNK_LIBRARY")):
        if cand:
            return load(cand)
    if os.environ.get("KDA2_LIBRARY"):
        lib = load(os.environ["KDA2_LIBRARY"])
        if lib.family == "chunk":
            return lib
    specs = sorted({p.parent.parent for p in _chunk_manifests()})
    libs = [load(d) for d in specs]
    fit = [lib for lib in libs if lib.k == k and lib.v == k and lib.features.qk_l2norm
           and lib.features.beta_sigmoid and {"softplus", "lower_bound"} <= set(lib.features.gate_modes)]
    if len(fit) != 1:
        raise RuntimeError(f"{len(fit)} built chunk-family specs run the benchmark configuration (K=V={k}, softplus "
                           f"and lower_bound gates, qk l2norm, beta sigmoid) among {[lib.spec for lib in libs]}; "
                           "build a chunk spec with those head dims (kernel_specs/) or pass --library <manifest.json>")
    return fit[0]


def start_cudnn(result: dict, use_cudnn: bool, layout: str, make=None):
    """The cuDNN-FE peer, or None with the reason in result["cudnn"] and a note ("not importable" included)."""
    def _make():
        from kda2.bench.cudnn_peer import Cudnn

        return Cudnn()

    if use_cudnn and layout != "v_first":
        result["cudnn"] = {"available": False, "error": "its kernel takes V-first states only (--layout v_first)"}
        result["notes"].append(f"cuDNN-FE not benchmarked: {result['cudnn']['error']}")
        return None
    return host.start_peer(result, "cudnn", "cuDNN-FE", use_cudnn, make or _make,
                           lambda c: {"entry": c.entry, **c.info}, "--no-cudnn")


#: the files of a run, replaced as a set (host.open_out)
OUT_FILES = ("bench_chunk.json", "bench_chunk.md", "bench_chunk.png", "bench_chunk_roofline.png")


def check_arguments(shapes: list[str] | None, gates: list[str] | None, layout: str, iters: int, warmup: int,
                    step_us: float | None, head_dim: int, overlap: str, a_log: float | None) -> list[str]:
    """What is wrong with the run's arguments, one item per option (option, value, what is allowed); [] if nothing."""
    bad = []
    try:
        resolve_shapes(shapes)
    except ValueError as exc:
        bad.append(f"--shapes: {exc}")
    bad += [f"--gates: unknown gate {g!r} (allowed {list(GATES)})" for g in (gates or []) if g not in GATES]
    if layout not in LAYOUTS:
        bad.append(f"--layout {layout!r} (allowed {list(LAYOUTS)})")
    if head_dim not in HEAD_DIMS:
        bad.append(f"--head-dim {head_dim} (allowed {list(HEAD_DIMS)})")
    if overlap not in OVERLAP:
        bad.append(f"--overlap {overlap!r} (allowed {list(OVERLAP)})")
    if iters < 1:
        bad.append(f"--iters {iters} (allowed: 1 or more)")
    if warmup < 0:
        bad.append(f"--warmup {warmup} (allowed: 0 or more)")
    if step_us is not None and not (math.isfinite(step_us) and step_us > 0):
        bad.append(f"--step-us {step_us} (allowed: a finite number of µs above 0)")
    if a_log is not None and not math.isfinite(a_log):
        bad.append(f"--a-log {a_log} (allowed: a finite number)")
    return bad


def run(out_dir: Path | None, library: str | None = None, shapes: list[str] | None = None,
        gates: list[str] | None = None, layout: str = "v_first", iters: int = 20, warmup: int = 3,
        use_fla: bool = True, argv: list[str] | None = None, use_cudnn: bool = True, step_us: float | None = None,
        head_dim: int = K_DIM, overlap: str = "auto", a_log: float | None = None) -> int:
    """The benchmark; writes bench_chunk.json (+ .md, .png, _roofline.png) under out_dir (None: a new
    ./bench_out/chunk-<date>-<time>) once the arguments, the GPU and the library are found good, replacing an earlier
    run's there (host.open_out); a run stopped before that writes nothing. `shapes`: ids and set names
    (p, k3, all; default p); `gates`: for every shape (default: both for P, lower_bound for K); `step_us`: the time of
    one 64-token state step for the serial-chain bound (recorded, not measured); `overlap`: auto (the library's
    choice), on (asked for) or off (refused), passed to every kda2 call (OVERLAP); `a_log`: every head's A_log instead
    of the draw (the same for every implementation). Exit status: 0 ok, 1 no kda2 library, a kda2 error or
    a disagreement with FLA (a peer's error or disagreement is recorded, not fatal), 2 no GPU / bad arguments."""
    result: dict[str, Any] = {"schema": 1, "kind": "kda2-bench-chunk",
                              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                              "command": " ".join([Path(sys.executable).name, "-m", "kda2.bench", *(argv or [])]),
                              "host": platform.node(), "anchors": ANCHORS, "notes": []}
    bad = check_arguments(shapes, gates, layout, iters, warmup, step_us, head_dim, overlap, a_log)
    if bad:
        return host.fail("; ".join(bad), 2)
    chosen = resolve_shapes(shapes)
    try:
        import torch
    except ImportError as exc:
        return host.fail(f"torch is not importable ({exc}): the benchmark needs torch and a GPU", 2)
    if not torch.cuda.is_available():
        return host.fail("torch.cuda is not available: the benchmark needs a GPU", 2)
    result["device"], result["versions"] = host.device(torch), host.versions(torch)
    try:
        lib = pick_library(library, head_dim)
        if (lib.k, lib.v) != (head_dim, head_dim):
            raise ValueError(f"{lib.spec} is built for K={lib.k}, V={lib.v}, the run is for --head-dim {head_dim}")
        ours = Ours(lib, OVERLAP.get(overlap))
    except Exception as exc:  # noqa: BLE001 - said, then fail the run
        return host.fail(f"kda2 chunk library: {type(exc).__name__}: {exc}", 1)
    out_dir = host.open_out(out_dir, "chunk", OUT_FILES)
    json_path = out_dir / "bench_chunk.json"
    result["library"] = {"manifest": str(lib.manifest_path), "spec": lib.spec, "family": lib.family, "arch": lib.arch,
                         "so_sha256": hashlib.sha256(lib.so_path.read_bytes()).hexdigest(),
                         "variants": [{"id": v["id"], "name": v.get("name")} for v in lib.variants]}
    all_gates = sorted({g for s in chosen for g in gates_for(s, gates)}, key=GATES.index)
    result["config"] = {"gates": {g: GATE_OPTIONS[g] for g in all_gates}, **OPTIONS, "layout": layout,
                        "shapes": [s.id for s in chosen],
                        "state_v_first": layout == "v_first", "q/k/v": "bf16", "g": "bf16 raw", "beta": "bf16 raw",
                        "A_log": "fp32 randn*0.5" if a_log is None else f"fp32 {a_log} (every head)",
                        "dt_bias": "fp32 randn", "initial_state": "fp32 randn*0.1",
                        "K": head_dim, "V": head_dim, "iters": iters, "warmup": warmup, "overlap": overlap,
                        "H_scaled": f"H x {K_DIM}/{head_dim} (same tokens and H*K as the P shapes)"
                        if head_dim != K_DIM else None}
    fla = host.start_fla(result, use_fla, FLA, lambda f: {"entry": f.entry, "FLA_FLASH_KDA": f.flash_kda_env})
    cudnn = start_cudnn(result, use_cudnn and head_dim == K_DIM, layout)
    if use_cudnn and head_dim != K_DIM:
        result["notes"].append(f"cuDNN-FE not benchmarked: its fused kernel is for K = V = {K_DIM}")
    timer = Timer(torch)
    result["timing"] = {"method": "median of CUDA-event times over iters calls after warm-up; a GPU spin before each "
                                  "call so launch cost is excluded; rotating input sets > 2x L2 where they fit",
                        "spin_cycles_per_us": timer.cycles_per_us, "entry_kda2": ours.entry,
                        "entry_fla": fla.entry if fla else None, "entry_cudnn": cudnn.entry if cudnn else None}
    try:
        result["copy"] = timer.copy_bandwidth()
    except Exception as exc:  # noqa: BLE001 - the floors are then left out
        result["copy"] = {"error": f"{type(exc).__name__}: {exc}"}
        torch.cuda.empty_cache()
    result["serial_step_us"] = step_us
    result["serial_step_source"] = "--step-us" if step_us is not None else None
    bounds = {"copy_tbps": result["copy"].get("TBps"), "step_us": step_us}
    print(f"device {result['device']['name']}; library {lib.spec}/{lib.arch}; layout {layout}; "
          f"FLA {'yes' if fla else 'no'}; cuDNN-FE {'yes' if cudnn else 'no'}; overlap {overlap}; copy "
          f"{result['copy'].get('TBps', float('nan')):.2f} TB/s", flush=True)
    l2 = result["device"]["l2_bytes"] or 50 * 2**20
    result["rows"] = rows = []
    with torch.no_grad():
        for s in chosen:
            sg = gates_for(s, gates)
            s = at_head_dim(s, head_dim)
            try:
                rows += bench_shape(torch, timer, ours, fla, s, sg, layout, iters, warmup, l2, cudnn, bounds,
                                    K=head_dim, a_log=a_log)
            except Exception as exc:  # noqa: BLE001 - e.g. out of memory allocating the shape: keep the others
                rows.append(dict(id=s.id, label=s.label, gate="*", layout=layout, anchor=anchor(s.id, sg[0]),
                                 kda2={"error": f"{type(exc).__name__}: {exc}"},
                                 traceback=traceback.format_exc(limit=6)))
                _print_row(rows[-1])
                torch.cuda.empty_cache()
            host.write_result(result, json_path)
    note = chart(result, out_dir / "bench_chunk.png")
    if note:
        result["notes"].append(note)
        print(note)
    from kda2.bench.report import roofline_chart

    note2 = roofline_chart(result, out_dir / "bench_chunk_roofline.png")
    if note2:
        result["notes"].append(note2)
        print(note2)
    host.write_result(result, json_path)
    (out_dir / "bench_chunk.md").write_text(markdown_table(result) + "\n")
    print(f"wrote {json_path}, bench_chunk.md{'' if note else ', bench_chunk.png'}"
          f"{'' if note2 else ', bench_chunk_roofline.png'}")
    failed = [r for r in rows if "error" in r.get("kda2", {}) or r.get("agreement", {}).get("ok") is False
              or "error" in r.get("agreement", {})]
    return 1 if failed else 0


def _print_row(r: dict) -> None:
    parts = [f"{r['id']:>3} {r['gate']:<11} {r.get('layout', ''):<8}"]
    for name in ("kda2", "fla", "cudnn", "cudnn_with_prep"):
        d = r.get(name)
        if d is None:
            continue
        if "skipped" in d:
            parts.append(f"{name} skipped")
        else:
            parts.append(f"{name} ERROR {d['error']}" if "error" in d else f"{name} {d['ms_median']:.3f} ms")
    c = r.get("cudnn") or {}
    if "P" in c and "ms_median" in c:
        parts.append(f"cudnn P={c['P']} nonfinite={c.get('nonfinite_o', 0) + c.get('nonfinite_state', 0)}"
                     + (f" o vs kda2 {c['o_rel_l2_vs_kda2']:.1e}" if "o_rel_l2_vs_kda2" in c else ""))
    if r.get("speedup"):
        parts.append(f"x{r['speedup']:.2f}")
    ag = r.get("agreement", {})
    if "o_rel_l2_kda2_vs_fla" in ag:
        parts.append(f"o vs FLA {ag['o_rel_l2_kda2_vs_fla']:.1e}{'' if ag.get('ok') else ' DISAGREE'}")
    print("  ".join(parts), flush=True)


__all__ = ["ALL_SHAPES", "ANCHORS", "FEW_CHAIN_SHAPES", "K3_SHAPES", "SHAPES", "SHAPE_SETS", "Shape", "anchor", "chart",
           "cudnn_table", "gates_for", "markdown_table", "resolve_shapes", "run", "start_cudnn"]
