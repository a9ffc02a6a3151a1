"""Cases, inputs, tolerances and the accuracy table of the chunk-family GPU tests (test_chunk_gpu.py).

Pure helpers: inputs are drawn with numpy (float32) and only turned into torch tensors by `to_torch`, so
everything except that last step runs on a CPU host without torch (tests/test_chunk_cases.py).

The accuracy bar (docs/DESIGN.md §1.1): relative L2 error of o and of the final state vs the float64 reference
≤ 5e-3, and no worse than 2 × FLA's error on the same inputs + 1e-4. The 1e-4 floor is there for
inputs on which FLA is extremely accurate (e.g. β ≈ 0, where the final state is almost the decayed
initial state and FLA's error is ~1e-6): twice a near-zero number is not a meaningful bar for a kernel
that keeps fp32 state but 16-bit intermediates.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

TOL = 5e-3          # absolute bar on relative L2, o and final state
FLA_FACTOR = 2.0    # ... and at most this times FLA's error on the same inputs
FLA_FLOOR = 1e-4    # ... plus this floor (see the module docstring)
#: ... and at most this times the error of the chunk kernels' rounding model (kda2.reference.chunk_model) on the same
#: inputs. The model gives the H200's measured errors to within 1.1 % (o) on all 108 case × head-dim runs of
#: 2026-12-05 (experiments/2026-12-05-prep-numerics), so an error 5 % over it is a kernel computing something other
#: than its design — a wrong fragment, a lost term — even while under TOL.
MODEL_FACTOR = 1.05
STRESS_CHANNELS = 10  # channels per head hit by a strong-decay stress input
STRESS_G = -20.0      # precomputed log-decay of those channels
STRESS_DT_BIAS = 6.0  # dt_bias of those channels for the softplus gate (g ≈ −exp(A_log)·6 per token)
# The long-memory stress: a state that forgets little over thousands of tokens, so a sequence's later output depends on
# its start state — what a split's combine produces (with ordinary inputs the gate and the delta rule forget a segment's
# start state within a few dozen tokens, and a wrong combine hides under the split tests' bar). Per token the gate
# decays by ≈ 3e-4 (softplus: exp(A_log) = e^-8 times softplus(g + dt_bias) ≈ 0.8; precomputed: the usual
# logsigmoid(randn)/16 scaled by 1/128) and the delta rule removes ≈ β/K of a direction, β ≈ sigmoid(randn − 6) ≈ 0.004.
LONG_MEMORY_A_LOG = -8.0
LONG_MEMORY_G_SCALE = 1.0 / 128
LONG_MEMORY_BETA_SHIFT = -6.0
# The prep kernel sums a channel of a 16-token diagonal block on tensor cores against the block's middle row while its
# decay over 8 tokens, in log2 units, is ≤ DIAG_RANGE (kda2/chunk.cuh), else against a row per quarter while its decay
# over 4 tokens is, else pairwise on CUDA cores. These per-token decays straddle both edges: 8·8.0·log2(e) ≈ 92.3 and
# 8·8.7·log2(e) ≈ 100.4, 4·16.0·log2(e) ≈ 92.3 and 4·17.4·log2(e) ≈ 100.4.
DIAG_RANGE = 96.0
BLOCK_EDGE_G = (-8.0, -8.7, -16.0, -17.4)
#: File stem of the accuracy table: <stem>.json (every session appended) and <stem>.md (this session's table).
RESULTS_STEM = "chunk-accuracy"


@dataclass(frozen=True)
class Case:
    id: str
    B: int = 1
    T: int = 64
    cu: tuple[int, ...] | None = None  # varlen: cu_seqlens (B = 1, T = cu[-1])
    H: int = 2
    ratio: int = 1                     # HV / H
    gate: str = "precomputed"          # precomputed | softplus | lower_bound
    dtype: str = "bf16"                # q/k/v/o dtype: bf16 | fp16 (a spec's features.input_dtypes)
    g_bf16: bool = False               # g 16-bit, in the input dtype (the ABI's KDA2_G_BF16), else fp32
    a_log: bool = True
    dt_bias: bool = True
    lower_bound: float = -5.0
    safe_gate: bool = False
    l2: bool = True                    # use_qk_l2norm_in_kernel (else the caller normalises q, k)
    bsig: bool = True                  # use_beta_sigmoid_in_kernel (else beta = sigmoid(randn) is passed)
    neg: bool = False                  # allow_neg_eigval
    h0: bool = True
    final: bool = True
    v_first: bool = False
    beta_bf16: bool = False            # beta 16-bit, in the input dtype (KDA2_BETA_BF16), else fp32
    param: str = "fp32"                # A_log / dt_bias dtype: fp32, bf16 or fp16 (a model cast with .to(...) / .half())
    scale: float | None = None
    stress: str | None = None          # g_minus20 | g_block_edge | dt_bias_plus6 | beta_small | beta_large | long_memory

    @property
    def HV(self) -> int:
        return self.H * self.ratio

    @property
    def N(self) -> int:
        return len(self.cu) - 1 if self.cu else self.B

    @property
    def shape_BT(self) -> tuple[int, int]:
        return (1, self.cu[-1]) if self.cu else (self.B, self.T)

    @property
    def longest(self) -> int:
        return max(b - a for a, b in zip(self.cu, self.cu[1:])) if self.cu else self.T

    @property
    def layout(self) -> str:
        return "v_first" if self.v_first else "k_first"

    @property
    def in_kernel_gate(self) -> bool:
        return self.gate != "precomputed"


VARLEN = [(0, 15), (0, 256, 500, 1000), (0, 15, 100, 300, 1200, 2000), (0, 100, 300, 1200, 3000, 4096)]

# A covering set, not the cartesian product: every T of {63, 64, 65, 160, 500, 1000, 1500, 2048, 8192},
# every gate mode with both state layouts, GVA 1, 2, 4 and 8, bf16 and fp32 raw gates, initial state on/off,
# final state on/off, l2norm / beta-sigmoid in kernel on and off, allow_neg_eigval once, the four varlen
# packings, the stress inputs, bf16 A_log / dt_bias. H = 2..3 except the two "larger" cases; T = 8192 runs with
# H=1, HV=2.
CASES = [
    Case("T63-precomputed-kf", B=2, T=63),
    Case("T64-softplus-bf16g-gva2-vf", B=2, T=64, ratio=2, gate="softplus", g_bf16=True, v_first=True),
    Case("T65-lowerbound-noAlog-H3-kf", T=65, H=3, gate="lower_bound", a_log=False),
    Case("T160-softplus-fp32g-nodt-noh0-kf", B=2, T=160, gate="softplus", dt_bias=False, h0=False),
    Case("T500-lowerbound-safe-gva2-betabf16-vf", T=500, ratio=2, gate="lower_bound", safe_gate=True,
         v_first=True, beta_bf16=True),
    Case("T500-softplus-nofinal-scale-kf", T=500, gate="softplus", final=False, scale=0.05),
    Case("T1000-precomputed-nol2-nobsig-vf", T=1000, l2=False, bsig=False, v_first=True),
    Case("T1500-softplus-negeig-gva2-kf", T=1500, ratio=2, gate="softplus", neg=True),
    Case("T2048-kimi-softplus-bf16g-H16-vf", T=2048, H=16, gate="softplus", g_bf16=True, v_first=True),
    Case("B4-T1000-softplus-H8-kf", B=4, T=1000, H=8, gate="softplus"),
    Case("T8192-softplus-bf16g-gva2-H1-vf", T=8192, H=1, ratio=2, gate="softplus", g_bf16=True, v_first=True),
    Case("varlen-15-softplus-vf", cu=VARLEN[0], gate="softplus", v_first=True),
    Case("varlen-256-500-1000-lowerbound-gva2-kf", cu=VARLEN[1], ratio=2, gate="lower_bound"),
    Case("varlen-15-100-300-1200-2000-softplus-bf16g-vf", cu=VARLEN[2], gate="softplus", g_bf16=True,
         v_first=True),
    Case("varlen-100-300-1200-3000-4096-precomputed-gva2-noh0-kf", cu=VARLEN[3], ratio=2, h0=False),
    Case("stress-g-20-precomputed-kf", T=500, stress="g_minus20"),
    Case("stress-g-20-precomputed-varlen-gva2-vf", cu=VARLEN[1], ratio=2, stress="g_minus20", v_first=True),
    Case("stress-g-blockedge-precomputed-vf", T=1000, stress="g_block_edge", v_first=True),
    Case("stress-dtbias+6-softplus-vf", T=1000, gate="softplus", stress="dt_bias_plus6", v_first=True),
    Case("stress-beta1e-3-kf", T=500, bsig=False, stress="beta_small"),
    Case("stress-beta0.999-gva2-vf", T=1000, ratio=2, bsig=False, stress="beta_large", v_first=True),
    # fp16 q/k/v/o (issue 13, chunk family): every gate mode in both state layouts, initial state on/off, final
    # state on/off, fp16 g and β, GVA 2, two varlen packings, the strong-decay stress (gated factors far below
    # fp16's normal range: the fp16 intermediates underflow only on terms decayed past mattering, kda2/chunk.cuh)
    # and the Kimi shape.
    Case("fp16-T65-precomputed-nofinal-kf", B=2, T=65, dtype="fp16", final=False),
    Case("fp16-T160-precomputed-f16g-noh0-vf", T=160, dtype="fp16", g_bf16=True, h0=False, v_first=True),
    Case("fp16-T500-softplus-f16g-kf", T=500, gate="softplus", dtype="fp16", g_bf16=True),
    Case("fp16-T1000-lowerbound-betaf16-gva2-vf", T=1000, ratio=2, gate="lower_bound", dtype="fp16",
         beta_bf16=True, v_first=True),
    Case("fp16-T2048-kimi-softplus-H16-vf", T=2048, H=16, gate="softplus", dtype="fp16", v_first=True),
    Case("fp16-varlen-15-100-300-1200-2000-softplus-vf", cu=VARLEN[2], gate="softplus", dtype="fp16", v_first=True),
    Case("fp16-varlen-256-500-1000-lowerbound-gva2-noh0-kf", cu=VARLEN[1], ratio=2, gate="lower_bound",
         dtype="fp16", h0=False),
    Case("fp16-stress-g-20-precomputed-vf", T=500, dtype="fp16", stress="g_minus20", v_first=True),
    # GVA 4 and 8 (any run-time HV / H) and 16-bit A_log / dt_bias (a model cast with .to(torch.bfloat16) or
    # .half()), issue 13.
    Case("T300-softplus-gva4-pbf16-vf", T=300, ratio=4, gate="softplus", param="bf16", v_first=True),
    Case("varlen-15-100-300-softplus-gva8-H1-kf", cu=VARLEN[2][:4], H=1, ratio=8, gate="softplus"),
    Case("T300-lowerbound-gva8-pbf16-H1-kf", T=300, H=1, ratio=8, gate="lower_bound", param="bf16"),
    Case("fp16-T300-softplus-gva8-pbf16-H1-vf", T=300, H=1, ratio=8, gate="softplus", dtype="fp16",
         param="bf16", v_first=True),
    Case("fp16-varlen-15-100-300-softplus-gva4-pbf16-kf", cu=VARLEN[2][:4], ratio=4, gate="softplus", dtype="fp16",
         param="bf16"),
    Case("fp16-T300-softplus-gva2-pfp16-kf", T=300, ratio=2, gate="softplus", dtype="fp16", param="fp16"),
    Case("T300-lowerbound-pfp16-vf", T=300, gate="lower_bound", param="fp16", v_first=True),
]


# ---- inputs ---------------------------------------------------------------------------------------

def _logsigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def draw(c: Case, seed: int, K: int = 128, V: int = 128) -> dict[str, Any]:
    """Fresh realistic inputs (docs/DESIGN.md §1.1) as float32 numpy arrays (None where the case has none).

    q, k, v ~ randn (q, k normalised here when l2norm is not in the kernel); precomputed g =
    logsigmoid(randn)/16, raw gate g ~ randn with A_log ~ randn·0.5, dt_bias ~ randn; beta ~ randn raw
    logits with the in-kernel sigmoid, else sigmoid(randn); h0 ~ randn·0.1. Stress inputs overwrite
    some of these (see `Case.stress`).
    """
    rng = np.random.default_rng(seed)
    B, T = c.shape_BT
    H, HV = c.H, c.HV

    def randn(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    q, k = randn(B, T, H, K), randn(B, T, H, K)
    if not c.l2:  # an unnormalised k makes the delta rule blow up; FLA's tests normalise too
        q = q / np.linalg.norm(q, axis=-1, keepdims=True)
        k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    v = randn(B, T, HV, V)
    g = randn(B, T, HV, K) if c.in_kernel_gate else (_logsigmoid(randn(B, T, HV, K)) / 16).astype(np.float32)
    beta = randn(B, T, HV) if c.bsig else _sigmoid(randn(B, T, HV)).astype(np.float32)
    A_log = (randn(HV) * 0.5) if c.in_kernel_gate and c.a_log else None
    dt_bias = randn(HV * K) if c.in_kernel_gate and c.dt_bias else None
    sshape = (c.N, HV, V, K) if c.v_first else (c.N, HV, K, V)
    h0 = (randn(*sshape) * 0.1) if c.h0 else None
    stressed: list[int] = []
    if c.stress == "g_minus20":
        if c.in_kernel_gate:
            raise ValueError(f"{c.id}: stress g_minus20 is for the precomputed gate")
        stressed = sorted(rng.choice(K, STRESS_CHANNELS, replace=False).tolist())
        g[..., stressed] = STRESS_G
    elif c.stress == "g_block_edge":
        if c.in_kernel_gate:
            raise ValueError(f"{c.id}: stress g_block_edge is for the precomputed gate")
        stressed = sorted(rng.choice(K, STRESS_CHANNELS, replace=False).tolist())
        for n, gv in enumerate(BLOCK_EDGE_G):   # the stressed channels in turn, one edge value each
            g[..., stressed[n::len(BLOCK_EDGE_G)]] = gv
    elif c.stress == "dt_bias_plus6":
        if c.gate != "softplus" or dt_bias is None:
            raise ValueError(f"{c.id}: stress dt_bias_plus6 needs the softplus gate with dt_bias")
        stressed = sorted(rng.choice(K, STRESS_CHANNELS, replace=False).tolist())
        dt_bias.reshape(HV, K)[:, stressed] = STRESS_DT_BIAS
    elif c.stress in ("beta_small", "beta_large"):
        if c.bsig:
            raise ValueError(f"{c.id}: stress {c.stress} is a post-sigmoid beta (bsig=False)")
        beta = np.full((B, T, HV), 1e-3 if c.stress == "beta_small" else 0.999, dtype=np.float32)
    elif c.stress == "long_memory":
        if c.gate == "lower_bound":
            raise ValueError(f"{c.id}: stress long_memory is for the softplus or precomputed gate (the lower_bound "
                             "gate decays by at least half its bound a token whatever A_log is)")
        if c.gate == "softplus":
            if A_log is None:
                raise ValueError(f"{c.id}: stress long_memory with the softplus gate needs A_log")
            A_log[:] = LONG_MEMORY_A_LOG
        else:
            g = g * LONG_MEMORY_G_SCALE
        raw = randn(B, T, HV) + LONG_MEMORY_BETA_SHIFT
        beta = raw if c.bsig else _sigmoid(raw)
    elif c.stress is not None:
        raise ValueError(f"{c.id}: unknown stress {c.stress!r}")
    cu = np.asarray(c.cu, dtype=np.int64) if c.cu else None
    return dict(q=q, k=k, v=v, g=g.astype(np.float32), beta=beta.astype(np.float32), A_log=A_log, dt_bias=dt_bias,
                initial_state=h0, cu_seqlens=cu, sshape=sshape, stressed_channels=stressed)


#: Case.dtype -> the torch dtype's name.
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
#: Case.param -> the torch dtype's name.
PARAM_DTYPES = {"fp32": "float32", **TORCH_DTYPES}


def to_torch(torch, x: dict[str, Any], c: Case, device: str = "cuda") -> dict[str, Any]:
    """The tensors the kernels get: q/k/v in the case's dtype (bf16 or fp16), fp32 (or 16-bit, the input dtype)
    g and beta, A_log / dt_bias in `param`'s dtype, fp32 rest, int64 cu_seqlens (FLA 0.6 needs int64)
    plus its host copy."""
    def t(a, dtype):
        return None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(device=device, dtype=dtype)

    e16, f32 = getattr(torch, TORCH_DTYPES[c.dtype]), torch.float32
    par = getattr(torch, PARAM_DTYPES[c.param])
    return dict(q=t(x["q"], e16), k=t(x["k"], e16), v=t(x["v"], e16),
                g=t(x["g"], e16 if c.g_bf16 else f32), beta=t(x["beta"], e16 if c.beta_bf16 else f32),
                A_log=t(x["A_log"], par), dt_bias=t(x["dt_bias"], par), initial_state=t(x["initial_state"], f32),
                cu_seqlens=t(x["cu_seqlens"], torch.int64),
                cu_seqlens_cpu=None if x["cu_seqlens"] is None else torch.from_numpy(x["cu_seqlens"].copy()),
                sshape=x["sshape"])


def as_passed(x: dict[str, Any], c: Case) -> dict[str, Any]:
    """What `to_torch` passes, as numpy float32 arrays (16-bit values where the case's tensors are 16-bit): the
    inputs of a model of the kernels on a host without torch (kda2.reference.chunk_model)."""
    from kda2.reference.rounding import bf16, fp16

    e16 = {"bf16": bf16, "fp16": fp16}[c.dtype]
    par = {"fp32": lambda a: a.astype(np.float32), "bf16": bf16, "fp16": fp16}[c.param]
    return dict(q=e16(x["q"]), k=e16(x["k"]), v=e16(x["v"]), g=e16(x["g"]) if c.g_bf16 else x["g"],
                beta=e16(x["beta"]) if c.beta_bf16 else x["beta"], initial_state=x["initial_state"],
                A_log=None if x["A_log"] is None else par(x["A_log"]),
                dt_bias=None if x["dt_bias"] is None else par(x["dt_bias"]), cu_seqlens=x["cu_seqlens"])


def options(c: Case) -> dict[str, Any]:
    """Keyword options of chunk_kda, identical for kda2 and FLA (A_log / dt_bias go separately)."""
    return dict(scale=c.scale, use_qk_l2norm_in_kernel=c.l2, use_gate_in_kernel=c.in_kernel_gate,
                use_beta_sigmoid_in_kernel=c.bsig, allow_neg_eigval=c.neg, safe_gate=c.safe_gate,
                lower_bound=c.lower_bound if c.gate == "lower_bound" else None, state_v_first=c.v_first)


def ref_options(c: Case) -> dict[str, Any]:
    """The same options for kda2.reference (which has no safe_gate: it only selects a kernel path)."""
    o = options(c)
    o.pop("safe_gate")
    return o


# ---- the accuracy bar -----------------------------------------------------------------------------

def bound(fla_err: float | None) -> float:
    """The largest error allowed: TOL, tightened to 2 × FLA's error + 1e-4 when FLA ran and was finite."""
    if fla_err is None or not math.isfinite(fla_err):
        return TOL
    return min(TOL, FLA_FACTOR * fla_err + FLA_FLOOR)


def verdict(ours: float, fla_err: float | None) -> tuple[bool, float]:
    b = bound(fla_err)
    return (math.isfinite(ours) and ours <= b), b


def model_verdict(ours: float | None, model: float | None) -> bool:
    """Whether an error is within MODEL_FACTOR of the rounding model's (True where nothing was modelled)."""
    return ours is None or model is None or (math.isfinite(ours) and ours <= MODEL_FACTOR * model)


# ---- the per-case table ---------------------------------------------------------------------------

@dataclass
class Row:
    spec: str
    case: str
    B: int
    T: int
    H: int
    HV: int
    cu_seqlens: list[int] | None
    gate: str
    layout: str
    seed: int
    ours_o: float | None = None
    ours_state: float | None = None
    fla_o: float | None = None
    fla_state: float | None = None
    fla_status: str = "not run"      # ok | rejected: ... | non-finite output | unavailable: ...
    bound_o: float | None = None
    bound_state: float | None = None
    model_o: float | None = None     # the rounding model's error on the same inputs (chunk family; None: not modelled)
    model_state: float | None = None
    ok: bool | None = None
    note: str = ""
    extra: dict = field(default_factory=dict)


def _e(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2e}" if math.isfinite(x) else str(x)


def format_table(rows: list[dict]) -> str:
    """Markdown table of ours vs FLA errors (relative L2 vs the fp64 reference), o and final state."""
    lines = [
        f"Relative L2 error vs the float64 reference. Bar: ≤ {TOL:g} and ≤ {FLA_FACTOR:g} × FLA + {FLA_FLOOR:g}; "
        f"where modelled, ≤ {MODEL_FACTOR:g} × the rounding model's (kda2.reference.chunk_model).",
        "",
        "| spec | case | layout | kda2 o | model o | FLA o | bound o | kda2 state | model state | FLA state | "
        "bound state | FLA | ok |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        ok = {True: "yes", False: "**NO**", None: "–"}[r.get("ok")]
        lines.append(f"| {r['spec']} | {r['case']} | {r['layout']} | {_e(r.get('ours_o'))} | {_e(r.get('model_o'))} | "
                     f"{_e(r.get('fla_o'))} | {_e(r.get('bound_o'))} | {_e(r.get('ours_state'))} | "
                     f"{_e(r.get('model_state'))} | {_e(r.get('fla_state'))} | {_e(r.get('bound_state'))} | "
                     f"{r.get('fla_status', '')} | {ok} |")
    return "\n".join(lines)


def write_gpu_results(out_dir: str | os.PathLike, rows: list[Row], torch, seed: int, stem: str = RESULTS_STEM) -> None:
    """What a GPU test module does at its end: the rows with the run's facts (seed, device, torch, fla-core) to
    `write_results`, and the table printed."""
    from importlib import metadata

    meta = {"seed": seed, "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    try:
        meta["fla-core"] = metadata.version("fla-core")
    except metadata.PackageNotFoundError:
        meta["fla-core"] = None
    path = write_results(out_dir, rows, meta, stem)
    print(f"\n{stem} table -> {path}\n{format_table([vars(r) for r in rows])}")


def write_results(out_dir: str | os.PathLike, rows: list[Row | dict], meta: dict | None = None,
                  stem: str = RESULTS_STEM) -> Path:
    """Append this session's rows to <out_dir>/<stem>.json ({"sessions": [...]}) and rewrite <stem>.md with
    this session's table (the recurrent matrix test writes its own stem). Atomic writes; an unreadable old
    file is kept aside."""
    from kda2.artifact.atomic import write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{stem}.json"
    data: dict[str, Any] = {"kind": f"kda2-{stem}", "schema": 1, "sessions": []}
    if path.exists():
        try:
            old = json.loads(path.read_text())
            if isinstance(old, dict) and isinstance(old.get("sessions"), list):
                data = old
            else:
                raise ValueError("no 'sessions' list")
        except ValueError:
            path.replace(path.with_name(f"{path.name}.unreadable.{os.getpid()}"))
    dict_rows = [asdict(r) if isinstance(r, Row) else dict(r) for r in rows]
    session = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
               "bar": {"tol": TOL, "fla_factor": FLA_FACTOR, "fla_floor": FLA_FLOOR}, **(meta or {}),
               "rows": dict_rows}
    data["sessions"].append(session)
    write_text(path, json.dumps(data, indent=1, default=str) + "\n")
    write_text(out / f"{stem}.md", format_table(dict_rows) + "\n")
    return path
