"""Exact float64 numpy reference of the KDA forward (FLA semantics).

This module is the correctness oracle for every kernel KDA² builds. It needs numpy only (no torch,
pydantic, Jinja or TVM) so it can run on the build host, in CI and on the GPU host alike.

Semantics (``docs/DESIGN.md`` §1), per sequence n and value
head hv, with state ``S ∈ R^{K×V}``, token by token::

    S ← Diag(exp(g_t)) · S
    S ← S + (β_t k_t) ⊗ (v_t − k_tᵀ S)
    o_t = (scale · q_t)ᵀ S

Shapes follow FLA: ``q, k [B,T,H,K]``, ``v [B,T,HV,V]``, ``g [B,T,HV,K]``, ``beta [B,T,HV]``,
``o [B,T,HV,V]``; states ``[N,HV,K,V]`` (``[N,HV,V,K]`` with ``state_v_first``). Value head ``hv``
uses q/k head ``hv // (HV // H)``.

Two independent evaluations are provided: :func:`recurrent_kda_ref` (the token loop above) and
:func:`chunk_kda_ref` (the chunked WY/UT form of docs/DESIGN.md §1). They agree to ~1e-15 relative in
float64 on well-conditioned inputs (‖k‖ ≈ 1, β ∈ [0, 2)); the chunk form never exponentiates a
positive number when ``g ≤ 0`` (pairwise ``exp(Γ_i − Γ_j)`` for ``j ≤ i`` only), so strongly
decaying gates stay finite.

Inputs of any float dtype are cast to float64 first (objects with ``.detach()``, e.g. torch
tensors, are converted through ``.float().cpu().numpy()`` without importing torch); outputs are
float64.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

__all__ = [
    "gate_activation",
    "l2norm",
    "recurrent_kda_ref",
    "chunk_kda_ref",
    "relative_l2",
]

L2NORM_EPS = 1e-6
SOFTPLUS_THRESHOLD = 20.0


# --------------------------------------------------------------------------------------------
# element-wise helpers
# --------------------------------------------------------------------------------------------

def _f64(x: Any, name: str) -> np.ndarray:
    """Cast an array-like (numpy, ml_dtypes bf16, torch tensor, list) to a float64 ndarray."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch tensor, without importing torch
        x = x.detach().float().cpu().numpy()
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: cannot convert to a float array ({exc})") from None
    return arr


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function in float64."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    ex = np.exp(x[~pos])
    out[~pos] = ex / (1.0 + ex)
    return out


def _softplus(x: np.ndarray) -> np.ndarray:
    """FLA's softplus: ``x`` for ``x > 20``, else ``log1p(exp(x))``."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > SOFTPLUS_THRESHOLD, x, np.log1p(np.exp(np.minimum(x, SOFTPLUS_THRESHOLD))))


def l2norm(x: Any, eps: float = L2NORM_EPS) -> np.ndarray:
    """``x / sqrt(Σ x² + eps)`` over the last axis (eps inside the sqrt, as FLA), in float64."""
    x = _f64(x, "x")
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def gate_activation(g_raw: Any, A_log: Any = None, dt_bias: Any = None,
                    lower_bound: Optional[float] = None) -> np.ndarray:
    """KDA's in-kernel gate, ``g_raw [..., HV, K] -> g [..., HV, K]`` (log-space decay), float64.

    ``x = g_raw + dt_bias.reshape(HV, K)`` (if given), then

    - ``lower_bound is None``: ``g = −exp(A_log[hv]) · softplus(x)`` (A_log required);
    - ``lower_bound`` set: ``g = lower_bound · sigmoid(exp(A_log[hv]) · x)``, or
      ``lower_bound · sigmoid(x)`` when ``A_log`` is None.
    """
    g_raw = _f64(g_raw, "g_raw")
    if g_raw.ndim < 2:
        raise ValueError(f"g_raw must have shape [..., HV, K], got {g_raw.shape}")
    HV, K = g_raw.shape[-2:]
    x = g_raw
    if dt_bias is not None:
        dt = _f64(dt_bias, "dt_bias")
        if dt.size != HV * K:
            raise ValueError(f"dt_bias must have HV*K = {HV}*{K} = {HV * K} elements "
                             f"([HV*K] or [HV, K]), got shape {dt.shape}")
        x = x + dt.reshape(HV, K)
    a = None
    if A_log is not None:
        al = _f64(A_log, "A_log")
        if al.shape != (HV,):
            raise ValueError(f"A_log must have shape [HV] = ({HV},), got {al.shape}")
        a = np.exp(al)[:, None]  # [HV, 1]
    if lower_bound is None:
        if a is None:
            raise ValueError("gate_activation: the softplus gate (lower_bound=None) requires A_log")
        return -a * _softplus(x)
    lb = float(lower_bound)
    return lb * _sigmoid(x if a is None else a * x)


def relative_l2(x: Any, ref: Any) -> float:
    """``‖x − ref‖₂ / ‖ref‖₂`` in float64 over all elements; ``‖x‖₂`` when ``ref`` is all zero."""
    x = _f64(x, "x")
    ref = _f64(ref, "ref")
    if x.shape != ref.shape:
        raise ValueError(f"relative_l2: shape mismatch {x.shape} vs {ref.shape}")
    den = float(np.linalg.norm(ref.ravel()))
    num = float(np.linalg.norm((x - ref).ravel()))
    if den == 0.0:
        return float(np.linalg.norm(x.ravel()))
    return num / den


# --------------------------------------------------------------------------------------------
# input preparation (shared by both evaluations)
# --------------------------------------------------------------------------------------------

@dataclass
class _Prepared:
    q: np.ndarray        # [B, T, HV, K], already scaled, l2-normalised if requested, GVA-expanded
    k: np.ndarray        # [B, T, HV, K]
    v: np.ndarray        # [B, T, HV, V]
    g: np.ndarray        # [B, T, HV, K], activated
    beta: np.ndarray     # [B, T, HV], activated
    seqs: list           # [(b, start, end)] per sequence n
    slots: np.ndarray    # [N] row of `pool` holding sequence n's state, -1 = skip
    pool: np.ndarray     # [P, HV, K, V] float64 (k-first), a private copy
    state_v_first: bool
    serving: bool        # ssm_state_indices given: return the whole pool


def _prepare(q, k, v, g, beta, *, scale, initial_state, use_qk_l2norm_in_kernel, use_gate_in_kernel,
             use_beta_sigmoid_in_kernel, allow_neg_eigval, A_log, dt_bias, lower_bound,
             state_v_first, cu_seqlens, ssm_state_indices) -> _Prepared:
    q = _f64(q, "q")
    k = _f64(k, "k")
    v = _f64(v, "v")
    g = _f64(g, "g")
    beta = _f64(beta, "beta")
    if q.ndim != 4:
        raise ValueError(f"q must have shape [B, T, H, K], got {q.shape}")
    if k.shape != q.shape:
        raise ValueError(f"k must have the shape of q {q.shape}, got {k.shape}")
    B, T, H, K = q.shape
    if v.ndim != 4 or v.shape[:2] != (B, T):
        raise ValueError(f"v must have shape [B, T, HV, V] = [{B}, {T}, HV, V], got {v.shape}")
    HV, V = v.shape[2], v.shape[3]
    if H == 0 or HV == 0 or HV % H != 0:
        raise ValueError(f"value heads HV={HV} must be a positive multiple of q/k heads H={H}")
    if g.shape != (B, T, HV, K):
        raise ValueError(f"g must have shape [B, T, HV, K] = {(B, T, HV, K)}, got {g.shape}")
    if beta.shape != (B, T, HV):
        raise ValueError(f"beta must have shape [B, T, HV] = {(B, T, HV)}, got {beta.shape}")
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError("allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True")
    if use_gate_in_kernel and lower_bound is None and A_log is None:
        raise ValueError("use_gate_in_kernel with the softplus gate (lower_bound=None) requires A_log")

    # sequences
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"cu_seqlens requires B == 1 (packed sequences), got B={B}")
        cu = np.asarray(cu_seqlens)
        if cu.ndim != 1 or cu.size < 2 or not np.issubdtype(cu.dtype, np.integer):
            raise ValueError(f"cu_seqlens must be a 1-D integer array [N+1] with N >= 1, got "
                             f"shape {cu.shape} dtype {cu.dtype}")
        if cu[0] != 0 or cu[-1] != T or np.any(np.diff(cu) < 0):
            raise ValueError(f"cu_seqlens must be non-decreasing from 0 to T={T}, got {cu.tolist()}")
        seqs = [(0, int(cu[i]), int(cu[i + 1])) for i in range(cu.size - 1)]
    else:
        seqs = [(b, 0, T) for b in range(B)]
    N = len(seqs)

    # states: pool [P, HV, K, V] (k-first internally) and the slot of every sequence
    state_shape = (HV, V, K) if state_v_first else (HV, K, V)
    layout = "[.., HV, V, K]" if state_v_first else "[.., HV, K, V]"
    if initial_state is not None:
        s0 = _f64(initial_state, "initial_state")
        if s0.ndim != 4 or s0.shape[1:] != state_shape:
            raise ValueError(f"initial_state must have shape {layout} with HV={HV}, K={K}, V={V}, "
                             f"got {s0.shape}")
        pool = np.array(s0.transpose(0, 1, 3, 2) if state_v_first else s0, dtype=np.float64, copy=True)
    else:
        pool = None
    serving = ssm_state_indices is not None
    if serving:
        if pool is None:
            raise ValueError("ssm_state_indices requires initial_state (the state pool)")
        idx = np.asarray(ssm_state_indices)
        if idx.shape != (N,) or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"ssm_state_indices must be an integer array [N] = ({N},), got shape "
                             f"{idx.shape} dtype {idx.dtype}")
        if np.any(idx >= pool.shape[0]):
            raise ValueError(f"ssm_state_indices out of range for a pool of {pool.shape[0]} states: "
                             f"{idx.tolist()}")
        used = idx[idx >= 0]
        if np.unique(used).size != used.size:
            raise ValueError(f"ssm_state_indices must not repeat a pool row: {idx.tolist()}")
        slots = idx.astype(np.int64)
    else:
        if pool is None:
            pool = np.zeros((N, HV, K, V), dtype=np.float64)
        elif pool.shape[0] != N:
            raise ValueError(f"initial_state.shape[0] must equal the number of sequences N={N}, "
                             f"got {pool.shape[0]}")
        slots = np.arange(N, dtype=np.int64)

    # element-wise preprocessing
    if scale is None:
        scale = K ** -0.5
    if use_qk_l2norm_in_kernel:
        q = l2norm(q)
        k = l2norm(k)
    q = q * float(scale)
    if use_gate_in_kernel:
        g = gate_activation(g, A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound)
    if use_beta_sigmoid_in_kernel:
        beta = _sigmoid(beta) * (2.0 if allow_neg_eigval else 1.0)
    G = HV // H
    if G > 1:
        q = np.repeat(q, G, axis=2)
        k = np.repeat(k, G, axis=2)
    return _Prepared(q=q, k=k, v=v, g=g, beta=beta, seqs=seqs, slots=slots, pool=pool,
                     state_v_first=bool(state_v_first), serving=serving)


def _run(p: _Prepared, seq_fn: Callable, output_final_state: bool):
    B, T, HV, _ = p.q.shape
    o = np.zeros((B, T, HV, p.v.shape[-1]), dtype=np.float64)
    for (b, s, e), slot in zip(p.seqs, p.slots):
        if slot < 0:
            continue  # serving form: skipped sequence, zero output, pool row untouched
        S = p.pool[slot].copy()  # [HV, K, V]
        if e > s:
            # per-sequence tensors, head-major: [HV, L, *]
            qs = np.ascontiguousarray(p.q[b, s:e].transpose(1, 0, 2))
            ks = np.ascontiguousarray(p.k[b, s:e].transpose(1, 0, 2))
            vs = np.ascontiguousarray(p.v[b, s:e].transpose(1, 0, 2))
            gs = np.ascontiguousarray(p.g[b, s:e].transpose(1, 0, 2))
            bs = np.ascontiguousarray(p.beta[b, s:e].T)
            os_, S = seq_fn(qs, ks, vs, gs, bs, S)
            o[b, s:e] = os_.transpose(1, 0, 2)
        p.pool[slot] = S
    if not output_final_state:
        return o, None
    final = p.pool.transpose(0, 1, 3, 2) if p.state_v_first else p.pool
    return o, np.ascontiguousarray(final)


# --------------------------------------------------------------------------------------------
# the two evaluations of one sequence, vectorised over value heads
# --------------------------------------------------------------------------------------------

def _recurrent_seq(q, k, v, g, beta, S):
    """q,k,g [HV,L,K], v [HV,L,V], beta [HV,L], S [HV,K,V] -> (o [HV,L,V], S)."""
    L = q.shape[1]
    o = np.empty(v.shape, dtype=np.float64)
    alpha = np.exp(g)
    for t in range(L):
        S = S * alpha[:, t, :, None]                                    # decay rows
        kt = k[:, t, None, :]                                           # [HV,1,K]
        resid = v[:, t, None, :] - kt @ S                               # [HV,1,V]
        S = S + (beta[:, t, None, None] * k[:, t, :, None]) * resid     # rank-1 delta update
        o[:, t] = (q[:, t, None, :] @ S)[:, 0]                          # read-out after update
    return o, S


def _forward_subst(A, R):
    """Solve (I + A) X = R for strictly lower-triangular A [HV,n,n]; R [HV,n,D]."""
    X = np.empty_like(R)
    n = A.shape[1]
    for i in range(n):
        X[:, i] = R[:, i] - np.einsum("hj,hjd->hd", A[:, i, :i], X[:, :i])
    return X


def _make_chunk_seq(chunk_size: int):
    def _chunk_seq(q, k, v, g, beta, S):
        HV, L, _ = q.shape
        o = np.empty(v.shape, dtype=np.float64)
        for c0 in range(0, L, chunk_size):
            c1 = min(c0 + chunk_size, L)
            n = c1 - c0
            qc, kc, vc, bc = q[:, c0:c1], k[:, c0:c1], v[:, c0:c1], beta[:, c0:c1]
            Gam = np.cumsum(g[:, c0:c1], axis=1)                         # [HV,n,K], chunk-local
            # pairwise exp(Γ_i − Γ_j), row by row and only for j ≤ i (never a positive exponent
            # when g ≤ 0, so unbounded gates cannot overflow)
            Akk = np.zeros((HV, n, n))
            Aqk = np.zeros((HV, n, n))
            for i in range(n):
                kE = kc[:, : i + 1] * np.exp(Gam[:, i, None, :] - Gam[:, : i + 1])  # [HV,i+1,K]
                Aqk[:, i, : i + 1] = np.einsum("hjd,hd->hj", kE, qc[:, i])          # q already scaled
                Akk[:, i, :i] = np.einsum("hjd,hd->hj", kE[:, :i], kc[:, i]) * bc[:, i, None]
            eG = np.exp(Gam)
            R = np.concatenate([bc[..., None] * kc * eG, bc[..., None] * vc], axis=-1)
            X = _forward_subst(Akk, R)
            Kd = kc.shape[-1]
            w, u = X[..., :Kd], X[..., Kd:]
            v_new = u - w @ S                                            # [HV,n,V]
            o[:, c0:c1] = (qc * eG) @ S + Aqk @ v_new
            G_last = Gam[:, -1, :]                                       # [HV,K]
            k_tail = kc * np.exp(G_last[:, None, :] - Gam)               # k ⊙ exp(Γ_last − Γ)
            S = np.exp(G_last)[:, :, None] * S + k_tail.transpose(0, 2, 1) @ v_new
        return o, S
    return _chunk_seq


# --------------------------------------------------------------------------------------------
# public entry points
# --------------------------------------------------------------------------------------------

def recurrent_kda_ref(q, k, v, g, beta, *, scale=None, initial_state=None, output_final_state=False,
                      use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                      use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, A_log=None,
                      dt_bias=None, lower_bound=None, state_v_first=False, cu_seqlens=None,
                      ssm_state_indices=None):
    """Token-by-token KDA forward in float64. Returns ``(o [B,T,HV,V], final_state | None)``.

    Options mirror FLA's ``fused_recurrent_kda``. ``cu_seqlens [N+1]`` packs N sequences (B == 1).
    ``ssm_state_indices [N]`` (serving form): ``initial_state`` is a pool, sequence n starts from
    ``initial_state[idx[n]]``, ``idx[n] < 0`` skips the sequence (zero output); the returned final
    state is the whole pool, updated on a copy. Without ``output_final_state`` returns ``(o, None)``.
    """
    p = _prepare(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                 use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
                 use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
                 A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound, state_v_first=state_v_first,
                 cu_seqlens=cu_seqlens, ssm_state_indices=ssm_state_indices)
    return _run(p, _recurrent_seq, output_final_state)


def check_chunk_size(chunk_size: Any) -> int:
    """A positive integer chunk size, or ValueError naming what was given."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    return int(chunk_size)


def chunk_kda_ref(q, k, v, g, beta, *, scale=None, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                  use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, A_log=None,
                  dt_bias=None, lower_bound=None, state_v_first=False, cu_seqlens=None,
                  ssm_state_indices=None, chunk_size=64):
    """Chunked (WY/UT) KDA forward in float64 (docs/DESIGN.md §1); same contract as :func:`recurrent_kda_ref`.

    Chunks of ``chunk_size`` tokens restart at every sequence start; the last chunk of a sequence
    may be partial. ``Γ`` (in-chunk cumulative gate) is exponentiated only pairwise for ``j ≤ i``.
    """
    chunk_size = check_chunk_size(chunk_size)
    p = _prepare(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                 use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
                 use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
                 A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound, state_v_first=state_v_first,
                 cu_seqlens=cu_seqlens, ssm_state_indices=ssm_state_indices)
    return _run(p, _make_chunk_seq(chunk_size), output_final_state)
