"""The GPU's roundings in numpy, and the rounding order of kernel steps built from them.

Where a kernel rounds decides its error against the float64 reference (docs/DESIGN.md §1, "What each of those
changes costs in accuracy"): these models let a test hold a kernel step to the result of its own rounding order
(tight), besides the reference (loose), and let `experiments/2026-12-05-prep-numerics` price a design before it is
written. numpy only, like the rest of `kda2.reference`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["bf16", "fp16", "tf32", "bfs_chunk", "bfs_system"]

F32 = np.float32


def bf16(x) -> np.ndarray:
    """Round to nearest even to bfloat16 (cvt.rn.bf16.f32), as float32 values."""
    u = np.ascontiguousarray(x, dtype=F32).view(np.uint32)
    u = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return u.view(F32)


def fp16(x) -> np.ndarray:
    """Round to nearest even to IEEE half (cvt.rn.f16.f32), as float32 values."""
    return np.asarray(x, dtype=F32).astype(np.float16).astype(F32)


def tf32(x) -> np.ndarray:
    """A tf32 operand as `kda2/mma.cuh tf32_operand` makes it: round half away from zero to 10 mantissa bits
    (cvt.rna.tf32.f32 for finite values), as float32 values."""
    u = np.ascontiguousarray(x, dtype=F32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(F32)


def bfs_chunk(Kp, Tdiag, beta, X, op_k=bf16, op_t=tf32) -> np.ndarray:
    """Y = (I + diag β K')⁻¹ diag β X for one chunk in the rounding order of the blocked substitution
    (`tests/kernels/bfs_check.cu`; experiments/2026-12-05-prep-numerics, variant bfs-mixed), fp32 sums:

        R_I = X_I − Σ_{J<I} op_k(K'_IJ) · op_k(Y_J)        Y_I = op_t(T_II diag β_I) · op_t(R_I)

    over the chunk's 16-token sub-chunks I. Kp [..., L, L] (strictly lower), Tdiag [..., L, 16] (row 16I + i: row i of
    T_II = (I + diag β_I K'_II)⁻¹), beta [..., L], X [..., L, C] (values already in the 16-bit type), L a multiple
    of 16; returns Y [..., L, C] float32 before its final rounding. op_k = fp16 for fp16 inputs.
    """
    Kp, Tdiag, beta, X = (np.asarray(a, dtype=F32) for a in (Kp, Tdiag, beta, X))
    L = X.shape[-2]
    if L % 16 or Kp.shape[-2:] != (L, L) or Tdiag.shape[-2:] != (L, 16) or beta.shape[-1] != L:
        raise ValueError(f"bfs_chunk: shapes Kp {Kp.shape}, Tdiag {Tdiag.shape}, beta {beta.shape}, X {X.shape} "
                         f"(want [..., L, L], [..., L, 16], [..., L], [..., L, C], L a multiple of 16)")
    ys, ops = [], []
    for I in range(L // 16):
        rows = slice(16 * I, 16 * I + 16)
        R = X[..., rows, :].copy()
        for J in range(I):
            R = (R - np.matmul(op_k(Kp[..., rows, 16 * J:16 * J + 16]), ops[J])).astype(F32)
        TD = op_t(Tdiag[..., rows, :] * beta[..., None, rows])
        Y = np.matmul(TD, op_t(R)).astype(F32)
        ys.append(Y)
        ops.append(op_k(Y))
    return np.concatenate(ys, axis=-2)


def bfs_system(seed: int, C: int = 128, e16=bf16, L: int = 64):
    """One chunk's blocked-substitution inputs as the prep has them (float64 truth and the kernel's operands):
    unit keys k [L, C], per-channel decays g = logsigmoid(randn) / 16 (the benchmark's), K'_ij = Σ_d k_id k_jd
    e^(Γ_id − Γ_jd) for j < i, β = sigmoid(randn), X ~ randn rounded by `e16`. Returns (Kp, Tdiag, beta, X, Y):
    float64 K' [L, L], the diagonal inverses T_II = (I + diag β_I K'_II)⁻¹ stacked [L, 16], β [L], X [L, C] and the
    exact Y = (I + diag β K')⁻¹ diag β X."""
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((L, C))
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    g = -np.logaddexp(0.0, -rng.standard_normal((L, C))) / 16
    G = np.cumsum(g, axis=0)
    Kp = np.zeros((L, L))
    for i in range(L):
        Kp[i, :i] = (k[:i] * np.exp(G[i] - G[:i])) @ k[i]
    beta = 1.0 / (1.0 + np.exp(-rng.standard_normal(L)))
    X = e16(rng.standard_normal((L, C))).astype(np.float64)
    A = beta[:, None] * Kp
    Tdiag = np.concatenate([np.linalg.inv(np.eye(16) + A[16 * I:16 * I + 16, 16 * I:16 * I + 16])
                            for I in range(L // 16)], axis=0)
    Y = np.linalg.solve(np.eye(L) + A, beta[:, None] * X)
    return Kp, Tdiag, beta, X, Y
