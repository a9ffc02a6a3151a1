"""Exact float64 reference of the SequenceSplitter (KDA forward split into parallel segments).

A sequence's state map over any stretch of tokens is affine: per token
``S ← (I − β_t k_t k_tᵀ) Diag(exp g_t) S + β_t k_t v_tᵀ`` (``S ∈ R^{K×V}``, ``exp g`` scales the
*rows* of ``S``, see :mod:`kda2.reference`). So a segment maps ``S_start ↦ M · S_start + ΔS`` with
``M ∈ R^{K×K}`` independent of ``S_start`` and of ``v``'s effect, and segments combine exactly.

In the chunk (WY/UT) form of one chunk of ``n ≤ C`` tokens (``Γ`` the in-chunk cumulative gate,
``w = (I + A)⁻¹ (β k ⊙ exp Γ)``, ``u = (I + A)⁻¹ (β v)``, ``K̃ = k ⊙ exp(Γ_last − Γ)`` [n×K])::

    S ↦ M_c S + b_c,   M_c = Diag(exp Γ_last) − K̃ᵀ w,   b_c = K̃ᵀ u

and a segment folds its chunks, ``(M, B) ← (M_c M, M_c B + b_c)`` from ``(I, 0)``. The fold is done
in factored form (M_c is never materialised): ``M ← Diag(exp Γ_last) M − K̃ᵀ (w M)`` costs
``2·n·K²`` MACs (+ K² scalings) on top of the ordinary state update of the ``B`` columns
(``B ← Diag(exp Γ_last) B + K̃ᵀ (u − w B)``, ``2·n·K·V`` MACs, which the unsplit forward spends
on ``S`` anyway). I.e. the ``K`` columns of ``M`` ride along as extra value columns with zero input.
:func:`chunk_transition` materialises ``(M_c, b_c)`` explicitly for checking.

The three phases of :func:`split_kda_ref`:

1. per segment (independent): ``(M_j, ΔS_j)`` = :func:`segment_transition` of its tokens;
2. per sequence, a scan over its segments from ``h0``: ``S_{j+1} = M_j S_j + ΔS_j``;
3. per segment (independent): the outputs of its tokens from its true start state ``S_j``
   (the chunk form of :func:`kda2.reference.chunk_kda_ref`).

Segments are cut on chunk boundaries (:func:`split_plan`, data-independent), so every segment's
chunks are exactly the unsplit chunks and the split result equals the unsplit one up to float64
rounding. Needs numpy only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

from . import _forward_subst, _make_chunk_seq, _prepare, check_chunk_size

__all__ = [
    "SplitPlan",
    "split_plan",
    "chunk_transition",
    "segment_transition",
    "scan_segments",
    "split_kda_ref",
]


# --------------------------------------------------------------------------------------------
# the plan: where every sequence is cut
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SplitPlan:
    """Cut points of every sequence of a (varlen) batch; depends only on lengths and the factor.

    ``bounds[n]`` is the tuple of cut points of sequence ``n``, relative to its start:
    ``(0, c_1, …, L_n)`` for ``len(bounds[n]) − 1`` segments (``()`` — no segment — for an empty
    sequence). Every inner cut is a multiple of ``chunk_size``; every segment is non-empty.
    """
    lengths: Tuple[int, ...]
    segments: int
    chunk_size: int
    bounds: Tuple[Tuple[int, ...], ...]

    @property
    def num_segments(self) -> Tuple[int, ...]:
        """Segments per sequence."""
        return tuple(max(len(b) - 1, 0) for b in self.bounds)

    @property
    def seg_offsets(self) -> np.ndarray:
        """``[N+1]`` prefix sums of :attr:`num_segments` (segment ids of sequence n: off[n]:off[n+1])."""
        return np.concatenate([[0], np.cumsum(self.num_segments, dtype=np.int64)]).astype(np.int64)

    def table(self) -> np.ndarray:
        """Flat segment table ``[total, 3]`` int64 of ``(n, start, end)``, token offsets relative to
        sequence n's start, ordered by sequence then position."""
        rows = [(n, b[j], b[j + 1]) for n, b in enumerate(self.bounds) for j in range(len(b) - 1)]
        return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


def split_plan(lengths: Sequence[int], segments: int, chunk_size: int = 64) -> SplitPlan:
    """Cut each sequence into at most ``segments`` pieces on chunk boundaries.

    A sequence of ``L`` tokens has ``n_c = ceil(L / chunk_size)`` chunks; it gets
    ``p = min(segments, n_c)`` segments, segment ``j`` holding chunks ``⌊j·n_c/p⌋ … ⌊(j+1)·n_c/p⌋``
    (balanced to within one chunk; the last may end on a partial chunk). An empty sequence gets no
    segment, a sequence of 1..chunk_size tokens exactly one. Data-independent by construction.
    """
    for name, val in (("segments", segments), ("chunk_size", chunk_size)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    lens = np.asarray(lengths)
    if lens.ndim != 1 or (lens.size and not np.issubdtype(lens.dtype, np.integer)) or np.any(lens < 0):
        raise ValueError(f"lengths must be a 1-D array of non-negative integers, got {lengths!r}")
    C, P = int(chunk_size), int(segments)
    bounds = []
    for L in (int(x) for x in lens):
        n_c = -(-L // C)
        p = min(P, n_c)
        if p == 0:
            bounds.append(())
            continue
        cuts = [min((j * n_c // p) * C, L) for j in range(p + 1)]
        bounds.append(tuple(cuts))
    return SplitPlan(lengths=tuple(int(x) for x in lens), segments=P, chunk_size=C,
                     bounds=tuple(bounds))


# --------------------------------------------------------------------------------------------
# phase 1: transitions
# --------------------------------------------------------------------------------------------

def _chunk_wy(k, v, g, beta):
    """WY/UT terms of one chunk. k, g [HV,n,K], v [HV,n,V], beta [HV,n] ->
    (exp Γ_last [HV,K], K̃ [HV,n,K], w [HV,n,K], u [HV,n,V])."""
    HV, n, Kd = k.shape
    Gam = np.cumsum(g, axis=1)                                            # [HV,n,K]
    # A_kk[i, j] = β_i k_iᵀ (k_j ⊙ exp(Γ_i − Γ_j)), j < i only (never a positive exponent, g ≤ 0)
    Akk = np.zeros((HV, n, n))
    for i in range(1, n):
        kE = k[:, :i] * np.exp(Gam[:, i, None, :] - Gam[:, :i])
        Akk[:, i, :i] = np.einsum("hjd,hd->hj", kE, k[:, i]) * beta[:, i, None]
    R = np.concatenate([beta[..., None] * k * np.exp(Gam), beta[..., None] * v], axis=-1)
    X = _forward_subst(Akk, R)
    w, u = X[..., :Kd], X[..., Kd:]
    G_last = Gam[:, -1, :]
    k_tail = k * np.exp(G_last[:, None, :] - Gam)                         # K̃ = k ⊙ exp(Γ_last − Γ)
    return np.exp(G_last), k_tail, w, u


def _as_heads(k, v, g, beta):
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    single = k.ndim == 2
    if single:
        k, v, g, beta = k[None], v[None], g[None], beta[None]
    if k.ndim != 3 or g.shape != k.shape or v.ndim != 3 or v.shape[:2] != k.shape[:2] \
            or beta.shape != k.shape[:2]:
        raise ValueError(f"expected k, g [L,K] (or [HV,L,K]), v [L,V], beta [L]; got k {k.shape}, "
                         f"v {v.shape}, g {g.shape}, beta {beta.shape}")
    return single, k, v, g, beta


def chunk_transition(k, v, g, beta):
    """Explicit ``(M_c [K,K], b_c [K,V])`` of ONE chunk of prepared inputs (all its tokens form
    the chunk): ``M_c = Diag(exp Γ_last) − K̃ᵀ w``, ``b_c = K̃ᵀ u``. Shapes as :func:`segment_transition`."""
    single, k, v, g, beta = _as_heads(k, v, g, beta)
    HV, L, Kd = k.shape
    if L == 0:
        M = np.broadcast_to(np.eye(Kd), (HV, Kd, Kd)).copy()
        b = np.zeros((HV, Kd, v.shape[-1]))
    else:
        eG, kt, w, u = _chunk_wy(k, v, g, beta)
        ktT = kt.transpose(0, 2, 1)
        M = eG[:, :, None] * np.eye(Kd) - ktT @ w
        b = ktT @ u
    return (M[0], b[0]) if single else (M, b)


def segment_transition(k, v, g, beta, *, chunk_size: int = 64):
    """Affine state map of one segment of prepared inputs: ``S_end = M @ S_start + dS``.

    ``k, g [L,K]``, ``v [L,V]``, ``beta [L]`` of one (sequence, value head), already prepared
    (l2-normalised k, activated gate and β — e.g. the fields of ``kda2.reference._prepare``); a
    leading value-head axis ``[HV, L, ·]`` is also accepted and vectorised over. ``q`` is not needed.
    Chunks of ``chunk_size`` tokens from the segment start (the last may be partial); each is folded
    as ``M ← Diag(exp Γ_last) M − K̃ᵀ (w M)``, ``dS ← Diag(exp Γ_last) dS + K̃ᵀ (u − w dS)`` from
    ``(I, 0)``. Returns ``(M [K,K], dS [K,V])`` (``[HV,K,K]``, ``[HV,K,V]`` with a head axis);
    an empty segment gives ``(I, 0)``.
    """
    C = check_chunk_size(chunk_size)
    single, k, v, g, beta = _as_heads(k, v, g, beta)
    HV, L, Kd = k.shape
    M = np.broadcast_to(np.eye(Kd), (HV, Kd, Kd)).copy()
    dS = np.zeros((HV, Kd, v.shape[-1]))
    for c0 in range(0, L, C):
        c1 = min(c0 + C, L)
        eG, kt, w, u = _chunk_wy(k[:, c0:c1], v[:, c0:c1], g[:, c0:c1], beta[:, c0:c1])
        ktT = kt.transpose(0, 2, 1)                                       # [HV,K,n]
        M = eG[:, :, None] * M - ktT @ (w @ M)                            # 2·n·K² MACs (the extra)
        dS = eG[:, :, None] * dS + ktT @ (u - w @ dS)                     # 2·n·K·V, as unsplit
    return (M[0], dS[0]) if single else (M, dS)


# --------------------------------------------------------------------------------------------
# phase 2: scan
# --------------------------------------------------------------------------------------------

def scan_segments(S0, transitions):
    """Start states of consecutive segments: ``S_0 = S0``, ``S_{j+1} = M_j @ S_j + dS_j``.

    ``transitions`` is a sequence of ``(M, dS)`` (any common leading axes). Returns
    ``(starts [list of S_j, one per segment], S_end)``.
    """
    S = np.asarray(S0, dtype=np.float64)
    starts = []
    for M, dS in transitions:
        starts.append(S)
        S = M @ S + dS
    return starts, S


# --------------------------------------------------------------------------------------------
# the whole split forward
# --------------------------------------------------------------------------------------------

def split_kda_ref(q, k, v, g, beta, *, scale=None, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                  use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, A_log=None,
                  dt_bias=None, lower_bound=None, state_v_first=False, cu_seqlens=None,
                  ssm_state_indices=None, chunk_size=64, segments=1, return_plan=False):
    """KDA forward through the SequenceSplitter; same contract as :func:`chunk_kda_ref` plus
    ``segments`` (the split factor: each sequence is cut into at most that many pieces on chunk
    boundaries, :func:`split_plan`). Returns ``(o, ht)`` like :func:`chunk_kda_ref`
    (``(o, ht, plan)`` with ``return_plan=True``).

    Phase 1 computes every segment's ``(M, dS)`` independently, phase 2 scans each sequence's
    segments from its initial state, phase 3 emits every segment's outputs from its start state
    independently. The final state is the scan's end state.
    """
    C = check_chunk_size(chunk_size)
    if isinstance(segments, bool) or not isinstance(segments, (int, np.integer)) or segments < 1:
        raise ValueError(f"segments must be a positive integer, got {segments!r}")
    p = _prepare(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                 use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
                 use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
                 A_log=A_log, dt_bias=dt_bias, lower_bound=lower_bound, state_v_first=state_v_first,
                 cu_seqlens=cu_seqlens, ssm_state_indices=ssm_state_indices)
    plan = split_plan([e - s for (_, s, e) in p.seqs], int(segments), C)
    B, T, HV, _ = p.q.shape
    o = np.zeros((B, T, HV, p.v.shape[-1]), dtype=np.float64)
    emit = _make_chunk_seq(C)

    def _head_major(x, b, s, e):
        return np.ascontiguousarray(np.moveaxis(x[b, s:e], 0, 1))     # [HV, L, ·]

    live = [n for n, slot in enumerate(p.slots) if slot >= 0]          # serving: slot < 0 skipped
    # phase 1: every segment of every live sequence, independently
    trans = {}
    for n in live:
        b, s0, _ = p.seqs[n]
        bd = plan.bounds[n]
        for j in range(len(bd) - 1):
            s, e = s0 + bd[j], s0 + bd[j + 1]
            trans[n, j] = segment_transition(_head_major(p.k, b, s, e), _head_major(p.v, b, s, e),
                                             _head_major(p.g, b, s, e), p.beta[b, s:e].T,
                                             chunk_size=C)
    # phase 2: per sequence, a scan over its segments from its initial state
    starts = {}
    finals = {}
    for n in live:
        nseg = len(plan.bounds[n]) - 1
        st, S_end = scan_segments(p.pool[p.slots[n]], [trans[n, j] for j in range(max(nseg, 0))])
        for j, S in enumerate(st):
            starts[n, j] = S
        finals[n] = S_end
    # phase 3: every segment's outputs from its true start state, independently
    for (n, j), S in starts.items():
        b, s0, _ = p.seqs[n]
        s, e = s0 + plan.bounds[n][j], s0 + plan.bounds[n][j + 1]
        o_seg, _ = emit(_head_major(p.q, b, s, e), _head_major(p.k, b, s, e),
                        _head_major(p.v, b, s, e), _head_major(p.g, b, s, e),
                        np.ascontiguousarray(p.beta[b, s:e].T), S.copy())
        o[b, s:e] = np.moveaxis(o_seg, 0, 1)
    for n in live:
        p.pool[p.slots[n]] = finals[n]
    if not output_final_state:
        ht = None
    else:
        final = p.pool.transpose(0, 1, 3, 2) if p.state_v_first else p.pool
        ht = np.ascontiguousarray(final)
    return (o, ht, plan) if return_plan else (o, ht)
