"""Tests of kda2.reference.split: the exact float64 SequenceSplitter (segments combine exactly)."""
from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
try:
    import kda2.reference  # noqa: F401
except ModuleNotFoundError:  # package not installed in this environment: use the source tree
    sys.path.insert(0, str(SRC))

from kda2.reference import chunk_kda_ref, l2norm, recurrent_kda_ref, relative_l2  # noqa: E402
from kda2.reference.split import (  # noqa: E402
    chunk_transition,
    scan_segments,
    segment_transition,
    split_kda_ref,
    split_plan,
)

TIGHT = 1e-12
K, V = 16, 32


def _logsigmoid(x):
    return -np.logaddexp(0.0, -x)


def make_inputs(seed, *, B=1, T=100, H=1, HV=2, raw_gate=False, h0_rows=None, v_first=False,
                beta_raw=False):
    rng = np.random.default_rng(seed)
    q = l2norm(rng.standard_normal((B, T, H, K)))
    k = l2norm(rng.standard_normal((B, T, H, K)))
    v = rng.standard_normal((B, T, HV, V))
    if raw_gate:
        g = rng.standard_normal((B, T, HV, K))
    else:
        g = _logsigmoid(rng.standard_normal((B, T, HV, K))) / 8
    beta = rng.standard_normal((B, T, HV))
    if not beta_raw:
        beta = 1.0 / (1.0 + np.exp(-beta))
    extra = dict(A_log=rng.standard_normal(HV) * 0.5, dt_bias=rng.standard_normal(HV * K))
    h0 = None
    if h0_rows is not None:
        h0 = rng.standard_normal((h0_rows, HV, V, K) if v_first else (h0_rows, HV, K, V))
    return (q, k, v, g, beta), h0, extra


GATES = {
    "pre": lambda ex: dict(),
    "softplus": lambda ex: dict(use_gate_in_kernel=True, A_log=ex["A_log"], dt_bias=ex["dt_bias"]),
    "lower_bound": lambda ex: dict(use_gate_in_kernel=True, lower_bound=-5.0, A_log=ex["A_log"],
                                   dt_bias=ex["dt_bias"]),
}

# (name, B, T, cu_seqlens): dense with T not a multiple of the chunk, varlen with empty and
# length-1 sequences and ragged lengths
SHAPES = {
    "dense": (2, 83, None),
    "varlen": (1, 190, np.array([0, 0, 1, 50, 50, 67, 157, 158, 190])),
}


def _both(args, *, segments, chunk_size=16, **kw):
    ref = chunk_kda_ref(*args, output_final_state=True, chunk_size=chunk_size, **kw)
    got = split_kda_ref(*args, output_final_state=True, chunk_size=chunk_size, segments=segments, **kw)
    return ref, got


# --------------------------------------------------------------------------------------------
# split == unsplit
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("segments", [1, 2, 3, 7])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("gate", list(GATES))
@pytest.mark.parametrize("v_first,with_h0", [(False, True), (True, True), (False, False)])
def test_split_matches_unsplit(segments, shape, gate, v_first, with_h0):
    B, T, cu = SHAPES[shape]
    N = B if cu is None else cu.size - 1
    seed = zlib.crc32(repr((segments, shape, gate, v_first, with_h0)).encode())
    args, h0, ex = make_inputs(seed, B=B, T=T, H=1, HV=2, raw_gate=gate != "pre",
                               h0_rows=N if with_h0 else None, v_first=v_first)
    h0_copy = None if h0 is None else h0.copy()
    kw = dict(initial_state=h0, state_v_first=v_first, cu_seqlens=cu, **GATES[gate](ex))
    (o_ref, h_ref), (o, h) = _both(args, segments=segments, **kw)
    assert o.shape == o_ref.shape and h.shape == h_ref.shape
    assert h.shape == ((N, 2, V, K) if v_first else (N, 2, K, V))
    assert np.all(np.isfinite(o)) and np.all(np.isfinite(h))
    assert relative_l2(o, o_ref) < TIGHT
    assert relative_l2(h, h_ref) < TIGHT
    if h0 is not None:  # the caller's state is not modified
        assert np.array_equal(h0, h0_copy)


@pytest.mark.parametrize("segments", [2, 3, 7])
def test_split_default_chunk_and_recurrent_oracle(segments):
    """Default chunk 64, T = 300 (4.7 chunks), beta ∈ [0, 2): agrees with both oracles."""
    args, h0, _ = make_inputs(11 + segments, B=1, T=300, H=1, HV=1, h0_rows=1, beta_raw=True)
    kw = dict(initial_state=h0, use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True,
              use_qk_l2norm_in_kernel=True)
    o_c, h_c = chunk_kda_ref(*args, output_final_state=True, **kw)
    o_r, h_r = recurrent_kda_ref(*args, output_final_state=True, **kw)
    o, h, plan = split_kda_ref(*args, output_final_state=True, segments=segments, return_plan=True,
                               **kw)
    assert len(plan.bounds[0]) - 1 == min(segments, 5)
    assert relative_l2(o, o_c) < TIGHT and relative_l2(h, h_c) < TIGHT
    assert relative_l2(o, o_r) < 1e-10 and relative_l2(h, h_r) < 1e-10


def test_split_gva_ratio_2_and_without_final_state():
    args, h0, _ = make_inputs(5, B=2, T=70, H=2, HV=4, h0_rows=2)
    o_ref, _ = chunk_kda_ref(*args, initial_state=h0, chunk_size=16)
    o, h = split_kda_ref(*args, initial_state=h0, chunk_size=16, segments=3)
    assert h is None
    assert relative_l2(o, o_ref) < TIGHT
    # GVA really is used: heads 0/1 share q/k head 0, so swapping q/k heads changes the outputs
    q, k, v, g, beta = args
    o_sw, _ = split_kda_ref(q[:, :, ::-1], k[:, :, ::-1], v, g, beta, initial_state=h0,
                            chunk_size=16, segments=3)
    assert relative_l2(o_sw, o_ref) > 1e-3


def test_split_serving_form():
    """ssm_state_indices: pool rows, a skipped sequence (idx < 0) gets zero output, row untouched."""
    cu = np.array([0, 40, 41, 100])
    args, _, _ = make_inputs(9, T=100, HV=2)
    pool = np.random.default_rng(1).standard_normal((5, 2, K, V))
    idx = np.array([3, -1, 0])
    kw = dict(initial_state=pool, cu_seqlens=cu, ssm_state_indices=idx, chunk_size=16)
    (o_ref, h_ref), (o, h) = _both(args, segments=3, **kw)
    assert relative_l2(o, o_ref) < TIGHT and relative_l2(h, h_ref) < TIGHT
    assert np.all(o[0, 40:41] == 0) and np.array_equal(h[[1, 2, 4]], pool[[1, 2, 4]])


def test_split_rejects_bad_segments():
    args, _, _ = make_inputs(0, T=8)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            split_kda_ref(*args, segments=bad)


# --------------------------------------------------------------------------------------------
# the transition: linear, exact, bounded
# --------------------------------------------------------------------------------------------

def _prepared_segment(seed, L, *, g_scale=8.0, beta_max=1.0, HV=None):
    rng = np.random.default_rng(seed)
    shp = (L,) if HV is None else (HV, L)
    k = l2norm(rng.standard_normal(shp + (K,)))
    v = rng.standard_normal(shp + (V,))
    g = _logsigmoid(rng.standard_normal(shp + (K,))) / g_scale
    beta = rng.uniform(0.0, beta_max, size=shp)
    return k, v, g, beta


def _run_tokens(k, v, g, beta, S0):
    """Run one (sequence, head) segment from S0 with the token-by-token oracle."""
    L = k.shape[0]
    q = np.zeros((1, L, 1, K))
    _, h = recurrent_kda_ref(q, k[None, :, None], v[None, :, None], g[None, :, None],
                             beta[None, :, None], initial_state=S0[None, None],
                             output_final_state=True)
    return h[0, 0]


@pytest.mark.parametrize("L,chunk", [(1, 64), (37, 64), (150, 64), (150, 16), (48, 16)])
def test_transition_is_the_affine_segment_map(L, chunk):
    k, v, g, beta = _prepared_segment(L + chunk, L, beta_max=2.0)
    M, dS = segment_transition(k, v, g, beta, chunk_size=chunk)
    assert M.shape == (K, K) and dS.shape == (K, V)
    rng = np.random.default_rng(L)
    for _ in range(2):
        S0 = rng.standard_normal((K, V))
        assert relative_l2(M @ S0 + dS, _run_tokens(k, v, g, beta, S0)) < 1e-12
    assert relative_l2(dS, _run_tokens(k, v, g, beta, np.zeros((K, V)))) < 1e-12
    # M does not depend on v; dS is linear in v
    k2, v2, _, _ = _prepared_segment(L + chunk + 1, L)
    M_b, dS_b = segment_transition(k, v2, g, beta, chunk_size=chunk)
    assert relative_l2(M_b, M) < 1e-14
    _, dS_sum = segment_transition(k, v + 3.0 * v2, g, beta, chunk_size=chunk)
    assert relative_l2(dS_sum, dS + 3.0 * dS_b) < 1e-12
    # M is the product of the per-token factors (I − β k kᵀ) Diag(exp g)
    P = np.eye(K)
    for t in range(L):
        P = (np.eye(K) - beta[t] * np.outer(k[t], k[t])) @ np.diag(np.exp(g[t])) @ P
    assert relative_l2(M, P) < 1e-12


def test_transition_chunk_fold_matches_explicit_chunk_maps():
    """The factored fold equals folding the explicit (M_c = Diag(e^Γ_last) − K̃ᵀw, b_c = K̃ᵀu)."""
    L, C = 100, 32
    k, v, g, beta = _prepared_segment(3, L, HV=2)
    M, dS = segment_transition(k, v, g, beta, chunk_size=C)
    assert M.shape == (2, K, K) and dS.shape == (2, K, V)
    maps = [chunk_transition(k[:, c:c + C], v[:, c:c + C], g[:, c:c + C], beta[:, c:c + C])
            for c in range(0, L, C)]
    _, S_end = scan_segments(np.zeros((2, K, V)), maps)
    M_f = np.broadcast_to(np.eye(K), (2, K, K))
    for Mc, _ in maps:
        M_f = Mc @ M_f
    assert relative_l2(M, M_f) < 1e-13 and relative_l2(dS, S_end) < 1e-13
    for h in range(2):  # the head axis is the per-head map
        M1, d1 = segment_transition(k[h], v[h], g[h], beta[h], chunk_size=C)
        assert relative_l2(M1, M[h]) < 1e-15 and relative_l2(d1, dS[h]) < 1e-15


def test_transition_of_empty_segment_is_identity():
    M, dS = segment_transition(np.zeros((0, K)), np.zeros((0, V)), np.zeros((0, K)), np.zeros(0))
    assert np.array_equal(M, np.eye(K)) and np.array_equal(dS, np.zeros((K, V)))


@pytest.mark.parametrize("regime", ["typical", "beta_near_2", "strong_decay", "weak_decay", "zero_gate"])
def test_transition_spectral_norm_bounded(regime):
    rng = np.random.default_rng(7)
    L = 200
    k = l2norm(rng.standard_normal((L, K)))
    v = rng.standard_normal((L, V))
    beta = rng.uniform(0.0, 2.0, size=L)
    if regime == "typical":
        g = _logsigmoid(rng.standard_normal((L, K))) / 8
    elif regime == "beta_near_2":
        g = _logsigmoid(rng.standard_normal((L, K))) / 64
        beta = 2.0 - rng.uniform(1e-12, 1e-3, size=L)
    elif regime == "strong_decay":
        # softplus of large inputs times exp(A_log): g ≈ −e³·(50..100)
        g = -np.exp(3.0) * np.log1p(np.exp(rng.uniform(50, 100, size=(L, K))))
    elif regime == "weak_decay":
        g = -rng.uniform(0.0, 1e-9, size=(L, K))
    else:
        g = np.zeros((L, K))
    for chunk in (16, 64):
        M, dS = segment_transition(k, v, g, beta, chunk_size=chunk)
        assert np.all(np.isfinite(M)) and np.all(np.isfinite(dS))
        assert np.linalg.norm(M, 2) <= 1.0 + 1e-9
    if regime == "strong_decay":
        assert np.linalg.norm(M, 2) < 1e-100  # the state is wiped
    if regime == "zero_gate":  # orthogonal-ish product of reflections: norm not artificially small
        assert np.linalg.norm(M, 2) > 1e-3


@pytest.mark.parametrize("regime", ["strong", "weak"])
def test_split_extreme_gates_finite_and_exact(regime):
    """In-kernel softplus gate with large inputs (strong decay) / lower-bound gate ≈ 0 (weak)."""
    cu = np.array([0, 1, 70, 200])
    args, h0, ex = make_inputs(21, T=200, HV=2, raw_gate=True, h0_rows=3, beta_raw=True)
    q, k, v, g, beta = args
    if regime == "strong":
        g = 60.0 + 40.0 * np.abs(g)
        gk = dict(use_gate_in_kernel=True, A_log=np.full(2, 3.0))
    else:
        gk = dict(use_gate_in_kernel=True, lower_bound=-1e-9, A_log=ex["A_log"])
    kw = dict(initial_state=h0, cu_seqlens=cu, use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True,
              **gk)
    (o_ref, h_ref), (o, h) = _both((q, k, v, g, beta), segments=3, **kw)
    assert np.all(np.isfinite(o)) and np.all(np.isfinite(h))
    assert relative_l2(o, o_ref) < TIGHT and relative_l2(h, h_ref) < TIGHT


# --------------------------------------------------------------------------------------------
# the plan
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("segments", [1, 2, 3, 7])
def test_plan_cuts(segments):
    lengths = [0, 1, 63, 64, 65, 128, 129, 300, 1000]
    C = 64
    plan = split_plan(lengths, segments, C)
    assert plan.lengths == tuple(lengths)
    for L, bd in zip(lengths, plan.bounds):
        if L == 0:
            assert bd == ()
            continue
        n_c = -(-L // C)
        assert len(bd) - 1 == min(segments, n_c)
        assert bd[0] == 0 and bd[-1] == L
        assert all(b % C == 0 for b in bd[1:-1])
        sizes = np.diff(bd)
        assert np.all(sizes > 0)
        chunks = np.diff([-(-b // C) for b in bd])
        assert chunks.max() - chunks.min() <= 1  # balanced to within one chunk
    assert plan.num_segments == tuple(max(len(b) - 1, 0) for b in plan.bounds)
    off = plan.seg_offsets
    tab = plan.table()
    assert off[0] == 0 and off[-1] == tab.shape[0] == sum(plan.num_segments)
    for n, bd in enumerate(plan.bounds):
        rows = tab[off[n]:off[n + 1]]
        assert np.all(rows[:, 0] == n)
        assert list(rows[:, 1]) == list(bd[:-1]) and list(rows[:, 2]) == list(bd[1:])


def test_plan_is_data_independent():
    cu = np.array([0, 0, 1, 65, 65, 200, 330])
    lengths = np.diff(cu)
    plans = []
    for seed, scale in ((1, 1.0), (2, 100.0), (3, 1e-6)):
        args, h0, _ = make_inputs(seed, T=330, HV=2, h0_rows=6)
        args = tuple(a * scale if i in (2,) else a for i, a in enumerate(args))
        plans.append(split_kda_ref(*args, initial_state=h0, cu_seqlens=cu, segments=3,
                                   return_plan=True)[2])
    assert plans[0] == plans[1] == plans[2] == split_plan(lengths, 3, 64)
    assert plans[0].bounds == ((), (0, 1), (0, 64), (), (0, 64, 128, 135), (0, 64, 128, 130))


def test_plan_rejects_bad_arguments():
    for bad in (dict(lengths=[3], segments=0), dict(lengths=[-1], segments=2),
                dict(lengths=[3], segments=2, chunk_size=0), dict(lengths=[[1, 2]], segments=2),
                dict(lengths=[1.5], segments=2)):
        with pytest.raises(ValueError):
            split_plan(**bad)


def test_scan_segments():
    rng = np.random.default_rng(0)
    maps = [(rng.standard_normal((3, 3)), rng.standard_normal((3, 2))) for _ in range(3)]
    S0 = rng.standard_normal((3, 2))
    starts, S = scan_segments(S0, maps)
    ref = S0
    for j, (M, d) in enumerate(maps):
        assert np.allclose(starts[j], ref)
        ref = M @ ref + d
    assert np.allclose(S, ref)
    assert scan_segments(S0, [])[0] == [] and np.array_equal(scan_segments(S0, [])[1], S0)

