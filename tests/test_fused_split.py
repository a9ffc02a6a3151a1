"""The exact split as composed for the fused kernel (tests/gpu/_check_kernels.py exact_split: transitions from S = I
with v = 0 and from 0, start states chained, every segment from its start), checked on a CPU with the float64 chunk
reference standing in for the kernel: split equals unsplit to fp32 storage, with varlen batches holding empty and
short sequences, GVA and both state layouts. (The kernel itself: tests/gpu/test_fused_gpu.py.)"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
torch = pytest.importorskip("torch")

from _check_kernels import exact_split  # noqa: E402

from kda2 import reference as ref  # noqa: E402
from kda2.bench.cases import Case, draw  # noqa: E402

KV = 16   # head dims of the stand-in (the composition does not depend on them)


def reference_run(q, k, v, g, beta, *, o, h0=None, ht=None, cu_seqlens=None, gate="precomputed", lower_bound=-5.0,
                  l2=True, bsig=True, neg=False, A_log=None, dt_bias=None, scale=None, v_first=False):
    """Fused16's call signature, computed by kda2.reference.chunk_kda_ref (fp64), outputs stored fp32 in place."""
    npy = (lambda x: None if x is None else x.double().numpy())  # noqa: E731
    o_, ht_ = ref.chunk_kda_ref(npy(q), npy(k), npy(v), npy(g), npy(beta), scale=scale, initial_state=npy(h0),
                                output_final_state=True, use_qk_l2norm_in_kernel=l2,
                                use_gate_in_kernel=gate != "precomputed", use_beta_sigmoid_in_kernel=bsig,
                                allow_neg_eigval=neg, A_log=npy(A_log), dt_bias=npy(dt_bias),
                                lower_bound=lower_bound if gate == "lower_bound" else None, state_v_first=v_first,
                                cu_seqlens=None if cu_seqlens is None else cu_seqlens.tolist())
    o.copy_(torch.from_numpy(o_))
    if ht is not None:
        ht.copy_(torch.from_numpy(ht_))


CASES = [
    Case("dense-B2-T700-softplus-gva2-vf", B=2, T=700, ratio=2, gate="softplus", v_first=True),
    Case("varlen-empty-15-300-1000-lowerbound-kf", cu=(0, 0, 15, 315, 1315), gate="lower_bound"),
    Case("varlen-1-64-65-precomputed-gva2-noh0-kf", cu=(0, 1, 65, 130), ratio=2, h0=False),
]


@pytest.mark.parametrize("split", [2, 4, 16])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_composed_split_equals_one_chain(case: Case, split: int):
    x = draw(case, 7, KV, KV)
    t = {n: None if x[n] is None else torch.from_numpy(np.ascontiguousarray(x[n])).float()
         for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "initial_state")}
    cu = None if x["cu_seqlens"] is None else torch.from_numpy(x["cu_seqlens"])
    opts = dict(gate=case.gate, lower_bound=case.lower_bound, l2=case.l2, bsig=case.bsig, neg=case.neg,
                A_log=t["A_log"], dt_bias=t["dt_bias"], v_first=case.v_first)
    outs = []
    for s in (1, split):
        o = torch.full_like(t["v"], float("nan"))
        ht = torch.full(x["sshape"], float("nan"))
        if s == 1:
            reference_run(t["q"], t["k"], t["v"], t["g"], t["beta"], o=o, h0=t["initial_state"], ht=ht, cu_seqlens=cu,
                          **opts)
        else:
            exact_split(torch, reference_run, t["q"], t["k"], t["v"], t["g"], t["beta"], o=o, split=s,
                        h0=t["initial_state"], ht=ht, cu_seqlens=cu, **opts)
        assert bool(torch.isfinite(o).all() and torch.isfinite(ht).all()), f"split {s}: unwritten outputs"
        outs.append((o, ht))
    (o1, h1), (o2, h2) = outs
    assert torch.allclose(o2, o1, rtol=1e-4, atol=1e-5), (o2 - o1).abs().max()
    assert torch.allclose(h2, h1, rtol=1e-4, atol=1e-5), (h2 - h1).abs().max()


def test_the_composed_split_refuses_unequal_head_dims():
    q = torch.zeros(1, 64, 1, 16)
    v = torch.zeros(1, 64, 1, 32)
    with pytest.raises(ValueError, match="K = V"):
        exact_split(torch, reference_run, q, q, v, q, torch.zeros(1, 64, 1), o=torch.empty_like(v), split=2)
