"""A rounding model of the chunk family's kernels: kda2/chunk.cuh's arithmetic in numpy, rounded where the kernels round.

Why (docs/DESIGN.md §1, "What each of those changes costs in accuracy"): the chunk kernels' error against the float64
reference is set by where they round 16-bit and tf32 values, not by accumulation order. On the GPU tests' 36 cases
at each built head dim (64, 128, 256; same inputs and seeds) this model gives the errors the H200 measured to within
1.1 % (o) and 0.6 % (final state), `experiments/2026-12-05-prep-numerics`. So the GPU tests hold every chunk library
to it as well as to the 5e-3 bar: an error well above the model's is a kernel that does not compute what its design
says, even when it passes the bar. And a prep change is priced here before it is written. numpy only.

What is modelled, in the kernels' order (everything else is fp32; the exponentials as exp2 in fp32):
  qk      q, k after the in-kernel l2norm, rounded to the input dtype (prep step 2a)
  Γ       the activated gate in log2 units, fp32, summed per 64-token chunk (rows past the sequence add nothing)
  offdiag the off-diagonal 16 × 16 blocks' factors of A and Aqk, x_i 2^(Γi−Γr) and k_j 2^(Γr−Γj), 16-bit
  diag    the diagonal blocks' factors about the middle row, tf32; channels past DIAG_RANGE of it summed exactly
  Aqk     scale · sums, 16-bit (A stays fp32, β on its rows)
  qg, kg, k2g   scale q 2^Γ, k 2^(Γlast−Γ), k 2^Γ, 16-bit
  levels, T16   prep_wu "levels": T = (I + A)⁻¹ (fp32 diagonal inverses, the block levels' operands tf32), T diag β
          rounded to 16 bits
  bfs_k, bfs_t  prep_wu "bfs": the K' products' operands (16-bit) and the diagonal product's (tf32)
          (kda2/reference/rounding.py bfs_chunk)
  wu, u   w and u as stored, 16-bit ("u" alone: u, by default as "wu")
  resid   `vnew="residual"` only: v − (k 2^Γ) S as the operand of v_new = (T diag β)(v − (k 2^Γ) S), 16-bit, the same
          v_new as u − w S with u = T diag β v, w = T diag β k 2^Γ, which that form never makes
  Sb, vnew, o   the state pass: S and v_new as 16-bit operands, o in the input dtype; S itself fp32
`rounding` replaces the rounding at named points ("fp32", "tf32" or "16"): an error budget, or a design's price.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from kda2.reference import _f64, _sigmoid, gate_activation
from kda2.reference.rounding import bf16, bfs_chunk, fp16, tf32

__all__ = ["POINTS", "KINDS", "PREP_WU", "VNEW", "DIAG_RANGE", "FUSED16", "FUSED16_RESIDUAL", "forward"]

F32 = np.float32
LOG2E = 1.4426950408889634
#: The diagonal blocks' range about their anchor (log2; kda2/chunk.cuh step 3, DIAG_RANGE).
DIAG_RANGE = 96.0
POINTS = ("qk", "offdiag", "diag", "Aqk", "qg", "kg", "k2g", "levels", "T16", "bfs_k", "bfs_t", "wu", "u", "resid", "Sb",
          "vnew", "o")
KINDS = ("fp32", "tf32", "16")
PREP_WU = ("levels", "bfs")
VNEW = ("wu", "residual")
_DTYPES = {"bf16": bf16, "fp16": fp16}
#: The fused 16-token kernel (kda2/fused.cuh Fused16) in this model's terms: 16-token steps (one diagonal block: no
#: off-diagonal factors, no levels), k 2^Γ and T diag β as tf32 operands of w / u's products, u kept in fp32.
FUSED16 = dict(chunk=16, prep_wu="levels", rounding={"k2g": "tf32", "T16": "tf32", "u": "fp32"})
#: Its residual form (kda2/fused.cuh since form r): no w or u; the consumer forms v − (k 2^Γ) S from 16-bit operands
#: (S's fragments, k 2^Γ) and multiplies it, rounded to tf32, by T diag β in tf32.
FUSED16_RESIDUAL = dict(chunk=16, prep_wu="levels", vnew="residual", rounding={"resid": "tf32", "T16": "tf32"})


class _Round:
    """The rounding at each point for one call: the kernels' own, or the one `rounding` names."""

    def __init__(self, e16, rounding: Optional[Mapping[str, str]]):
        self.e16 = e16
        self.over = dict(rounding or {})
        bad = sorted(set(self.over) - set(POINTS))
        if bad:
            raise ValueError(f"rounding: no point {', '.join(bad)} (points: {', '.join(POINTS)})")
        for p, kind in self.over.items():
            if kind not in KINDS:
                raise ValueError(f"rounding[{p!r}]: {kind!r}; allowed: {', '.join(KINDS)}")

    def __call__(self, point: str, default):
        kind = self.over.get(point)
        if kind is None:
            return default
        return {"fp32": lambda x: np.asarray(x, dtype=F32), "tf32": tf32, "16": self.e16}[kind]


def _mm(a, b):
    return np.matmul(a.astype(F32), b.astype(F32)).astype(F32)


def _fsub(A):
    """(I + A)⁻¹ of strictly lower-triangular blocks A [..., n, n] by fp32 forward substitution."""
    n = A.shape[-1]
    T = np.zeros_like(A, dtype=F32)
    eye = np.eye(n, dtype=F32)
    for i in range(n):
        T[..., i, :] = eye[i] - np.einsum("...j,...jc->...c", A[..., i, :i], T[..., :i, :]).astype(F32)
    return T


def _prep(R: _Round, qc, kc, vc, gc, bc, scale: float, C: int, prep_wu: str, right: str, vnew: str) -> dict:
    """One chunk of C tokens (padded), all value heads: what the prep writes to its workspace slot."""
    E = R.e16
    HV, _, K = kc.shape
    nb = C // 16
    Gam = np.cumsum(gc, axis=1, dtype=F32)
    Aacc = np.zeros((HV, C, C), F32)
    Qacc = np.zeros((HV, C, C), F32)
    for I in range(nb):
        r, m, e = 16 * I, 16 * I + 8, 16 * I + 15
        rows = slice(r, r + 16)
        gi = Gam[:, rows]
        if I > 0:   # off-diagonal blocks, anchored at the sub-chunk's first row: both factors <= 1
            cols = slice(0, r)
            off = R("offdiag", E)
            lk = off(kc[:, rows] * np.exp2(gi - Gam[:, r:r + 1]))
            lq = off(qc[:, rows] * np.exp2(gi - Gam[:, r:r + 1]))
            if right == "direct":
                rt = off(kc[:, cols] * np.exp2(Gam[:, r:r + 1] - Gam[:, cols]))
            else:   # "shared16": each column block's k_j 2^(Γe(J)−Γj) once in 16 bits, times 2^(Γr(I)−Γe(J)), rounded again
                rt = np.concatenate([off(off(kc[:, 16 * J:16 * J + 16] * np.exp2(Gam[:, 16 * J + 15:16 * J + 16]
                                                                                   - Gam[:, 16 * J:16 * J + 16]))
                                         * np.exp2(Gam[:, r:r + 1] - Gam[:, 16 * J + 15:16 * J + 16]))
                                     for J in range(I)], axis=1)
            Aacc[:, rows, cols] = _mm(lk, rt.transpose(0, 2, 1))
            Qacc[:, rows, cols] = _mm(lq, rt.transpose(0, 2, 1))
        ok = np.maximum(Gam[:, r] - Gam[:, m], Gam[:, m] - Gam[:, e]) <= DIAG_RANGE     # [HV, K]
        okf = ok[:, None, :].astype(F32)
        dl = np.exp2(np.where(ok[:, None, :], gi - Gam[:, m:m + 1], 0.0)).astype(F32)
        dr = np.exp2(np.where(ok[:, None, :], Gam[:, m:m + 1] - gi, 0.0)).astype(F32)
        dg = R("diag", tf32)
        tr = dg(kc[:, rows] * dr * okf)
        with np.errstate(over="ignore", invalid="ignore"):   # j > i products may overflow; they are masked below
            dK, dQ = _mm(dg(kc[:, rows] * dl * okf), tr.transpose(0, 2, 1)), _mm(dg(qc[:, rows] * dl * okf),
                                                                                  tr.transpose(0, 2, 1))
        if not ok.all():   # the exact path: pairwise 2^(Γi−Γj), j <= i
            out = (~ok).astype(F32)[:, None, None, :]
            pw = np.exp2(np.minimum(gi[:, :, None, :] - gi[:, None, :, :], 0.0)).astype(F32)
            dK = dK + (kc[:, rows, None, :] * kc[:, None, rows, :] * pw * out).sum(-1, dtype=F32)
            dQ = dQ + (qc[:, rows, None, :] * kc[:, None, rows, :] * pw * out).sum(-1, dtype=F32)
        Aacc[:, rows, rows] = dK
        Qacc[:, rows, rows] = dQ
    Kp = np.where(np.tril(np.ones((C, C), bool), -1), Aacc, 0.0).astype(F32)
    A = (bc[:, :, None] * Kp).astype(F32)
    Aqk = R("Aqk", E)(np.where(np.tril(np.ones((C, C), bool)), F32(scale) * Qacc, 0.0))
    e2 = np.exp2(Gam).astype(F32)
    qg = R("qg", E)(F32(scale) * qc * e2)
    kg = R("kg", E)(kc * np.exp2(Gam[:, -1:, :] - Gam))
    k2g = R("k2g", E)(kc * e2)
    glast = np.exp2(Gam[:, -1, :]).astype(F32)
    Tdiag = [_fsub(A[:, 16 * I:16 * I + 16, 16 * I:16 * I + 16]) for I in range(nb)]
    if prep_wu == "levels":
        T = np.zeros((HV, C, C), F32)
        for I in range(nb):
            T[:, 16 * I:16 * I + 16, 16 * I:16 * I + 16] = Tdiag[I]
        s = 16
        while s < C:   # T_IJ = −T_II (A_IJ T_JJ) on tf32, 16-blocks then the 32-block
            for b0 in range(0, C, 2 * s):
                J, I = slice(b0, b0 + s), slice(b0 + s, b0 + 2 * s)
                lv = R("levels", tf32)
                T[:, I, J] = -_mm(lv(T[:, I, I]), lv(_mm(lv(A[:, I, J]), lv(T[:, J, J]))))
            s *= 2
        T16 = R("T16", E)(T * bc[:, None, :])
        if vnew == "residual":
            return dict(T16=T16, k2g=k2g, v=vc, qg=qg, kg=kg, Aqk=Aqk, glast=glast)
        w, u = R("wu", E)(_mm(T16, k2g)), R("u", R("wu", E))(_mm(T16, vc))
    else:
        Td = np.concatenate(Tdiag, axis=1)
        w, u = (R(pt, R("wu", E))(bfs_chunk(Kp, Td, bc, X, op_k=R("bfs_k", E), op_t=R("bfs_t", tf32)))
                for pt, X in (("wu", k2g), ("u", vc)))
    return dict(w=w, u=u, qg=qg, kg=kg, Aqk=Aqk, glast=glast)


def _seq(R: _Round, q, k, v, g2, b, S, scale: float, C: int, prep_wu: str, right: str, vnew: str):
    """One sequence, all value heads: q, k, g2 [HV, L, K], v [HV, L, V], b [HV, L], S [HV, K, V] -> (o, S)."""
    E = R.e16
    L = q.shape[1]
    o = np.empty(v.shape, F32)
    for c0 in range(0, L, C):
        n = min(C, L - c0)

        def pad(x):
            return np.pad(x[:, c0:c0 + n], [(0, 0), (0, C - n)] + [(0, 0)] * (x.ndim - 2))

        s = _prep(R, pad(q), pad(k), pad(v), pad(g2), pad(b), scale, C, prep_wu, right, vnew)
        Sb = R("Sb", E)(S)
        if vnew == "residual":
            vn = R("vnew", E)(_mm(s["T16"], R("resid", E)(s["v"] - _mm(s["k2g"], Sb))))
        else:
            vn = R("vnew", E)(s["u"] - _mm(s["w"], Sb))
        O = _mm(s["qg"], Sb) + _mm(s["Aqk"], vn)
        S = (s["glast"][:, :, None] * S + _mm(s["kg"].transpose(0, 2, 1), vn)).astype(F32)
        o[:, c0:c0 + n] = R("o", E)(O)[:, :n]
    return o, S


def forward(q, k, v, g, beta, *, dtype: str, scale: Optional[float] = None, initial_state: Any = None,
            cu_seqlens: Any = None, use_qk_l2norm_in_kernel: bool = False, use_gate_in_kernel: bool = False,
            use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False, A_log: Any = None,
            dt_bias: Any = None, lower_bound: Optional[float] = None, state_v_first: bool = False,
            prep_wu: str = "levels", chunk: int = 64, offdiag_right: str = "direct", vnew: str = "wu",
            rounding: Optional[Mapping[str, str]] = None) -> tuple[np.ndarray, np.ndarray]:
    """The chunk kernels' forward as they round it: `(o [B, T, HV, V], final state)` as float32, the state in the
    layout `state_v_first` names. Inputs as the kernels get them (already in their dtypes: q/k/v in `dtype`, "bf16"
    or "fp16"); options as `kda2.reference.chunk_kda_ref`'s. `prep_wu`: the prep's w / u ("levels" or "bfs", the
    variant knob); `chunk`: tokens per state step (64 is what the kernels build; 16 / 32 price a design);
    `offdiag_right`: the off-diagonal blocks' right factors as the kernels form them ("direct": k_j 2^(Γr−Γj) per
    tile) or shared per column block and rescaled in 16 bits ("shared16", a design priced here: two roundings);
    `vnew`: how v_new is formed — "wu": u − w S (the kernels'), "residual": (T diag β)(v − (k 2^Γ) S), the fused
    form that makes neither w nor u (levels only); `rounding`: {point: "fp32" | "tf32" | "16"} overrides (POINTS)."""
    if dtype not in _DTYPES:
        raise ValueError(f"dtype {dtype!r}; allowed: {', '.join(_DTYPES)}")
    if prep_wu not in PREP_WU:
        raise ValueError(f"prep_wu {prep_wu!r}; allowed: {', '.join(PREP_WU)}")
    if chunk not in (16, 32, 64):
        raise ValueError(f"chunk {chunk!r}; allowed: 16, 32, 64")
    if offdiag_right not in ("direct", "shared16"):
        raise ValueError(f"offdiag_right {offdiag_right!r}; allowed: direct, shared16")
    if vnew not in VNEW or (vnew == "residual" and prep_wu != "levels"):
        raise ValueError(f"vnew {vnew!r} with prep_wu {prep_wu!r}; allowed: wu, or residual with levels")
    R = _Round(_DTYPES[dtype], rounding)
    q, k, v, g, beta = (_f64(x, n).astype(F32) for x, n in ((q, "q"), (k, "k"), (v, "v"), (g, "g"), (beta, "beta")))
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if use_qk_l2norm_in_kernel:
        def l2(x):
            return R("qk", R.e16)(x * (1.0 / np.sqrt((x ** 2).sum(-1, keepdims=True, dtype=F32) + F32(1e-6))))
        q, k = l2(q), l2(k)
    if use_gate_in_kernel:
        g = gate_activation(g, A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound)
    g2 = (np.asarray(g, dtype=np.float64) * LOG2E).astype(F32)
    if use_beta_sigmoid_in_kernel:
        beta = (_sigmoid(beta.astype(np.float64)) * (2.0 if allow_neg_eigval else 1.0)).astype(F32)
    if HV > H:
        q, k = np.repeat(q, HV // H, axis=2), np.repeat(k, HV // H, axis=2)
    scale = float(scale) if scale is not None else K ** -0.5
    if cu_seqlens is not None:
        cu = [int(x) for x in np.asarray(_f64(cu_seqlens, "cu_seqlens"))]
        seqs = [(0, a, z) for a, z in zip(cu, cu[1:])]
    else:
        seqs = [(b, 0, T) for b in range(B)]
    h0 = None if initial_state is None else _f64(initial_state, "initial_state").astype(F32)
    if h0 is not None and state_v_first:
        h0 = np.ascontiguousarray(h0.transpose(0, 1, 3, 2))
    o = np.zeros((B, T, HV, V), F32)
    finals = []
    for n, (b, s0, s1) in enumerate(seqs):
        S = h0[n].copy() if h0 is not None else np.zeros((HV, K, V), F32)
        if s1 > s0:
            def hm(x):
                return np.ascontiguousarray(x[b, s0:s1].swapaxes(0, 1))
            os_, S = _seq(R, hm(q), hm(k), hm(v), hm(g2), np.ascontiguousarray(beta[b, s0:s1].T), S, scale, chunk,
                          prep_wu, offdiag_right, vnew)
            o[b, s0:s1] = os_.swapaxes(0, 1)
        finals.append(S)
    ht = np.stack(finals)
    return o, (np.ascontiguousarray(ht.transpose(0, 1, 3, 2)) if state_v_first else ht)
