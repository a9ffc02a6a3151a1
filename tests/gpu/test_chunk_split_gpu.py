"""The exact split of the chunk family on a GPU (docs/DESIGN.md §1): a sequence cut into segments, each
segment's transition folded in parallel, a combine into true start states, then every segment emitted
from its start state.

The split is exact: split and unsplit calls agree to rounding (≤ 1e-3 relative L2, o and final state), both
meet the accuracy bar vs the float64 reference, for every gate mode, both state layouts, GVA, no initial
state, varlen with empty and length-1 sequences, extreme gates, and a state that remembers (`long_memory`: without
it a segment forgets its start state within a few dozen tokens and a wrong combine would pass); at T = 65536 split 8 vs
unsplit, with ordinary and with long-memory inputs. Outputs are poisoned with NaN before every call. Without a GPU every test here skips (conftest.py).
"""
from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from feature_matrix import require_built  # noqa: E402
from kda2.bench.cases import Case, draw, options, ref_options, to_torch, verdict  # noqa: E402
from test_chunk_gpu import _call, _nonfinite, _rel, chunk_kda, chunk_lib  # noqa: E402,F401 - fixtures

pytestmark = pytest.mark.gpu

DEVICE = "cuda"
#: Split vs unsplit: the segments' start states come through the fold (16-bit operands like the state pass) and
#: an fp32 combine, so the two differ by rounding only.
SPLIT_TOL = 1e-3
# Empty and length-1 sequences among long ones: the split plan is per sequence (trailing segments empty).
EDGES = (0, 0, 1, 700, 701, 2600)

CASES = [
    Case("split-softplus-B2-T3000-vf", B=2, T=3000, gate="softplus", v_first=True),
    Case("split-lowerbound-T2100-kf", T=2100, gate="lower_bound"),
    Case("split-precomputed-gva2-noh0-T1500-kf", T=1500, ratio=2, h0=False),
    Case("split-varlen-empty-len1-softplus-vf", cu=EDGES, gate="softplus", v_first=True),
    Case("split-varlen-empty-len1-precomputed-gva2-kf", cu=EDGES, ratio=2),
    Case("split-stress-dtbias+6-softplus-T1000-vf", T=1000, gate="softplus", stress="dt_bias_plus6", v_first=True),
    Case("split-stress-g-20-precomputed-T1000-kf", T=1000, stress="g_minus20"),
    # fp16: the fold has an entry per input dtype (it reads the workspace's fp16 tiles)
    Case("split-fp16-softplus-T2100-vf", T=2100, gate="softplus", dtype="fp16", v_first=True),
    Case("split-fp16-varlen-empty-len1-lowerbound-gva2-kf", cu=EDGES, ratio=2, gate="lower_bound", dtype="fp16"),
    Case("split-longmem-softplus-B2-T3000-vf", B=2, T=3000, gate="softplus", stress="long_memory", v_first=True),
    Case("split-longmem-varlen-empty-len1-precomputed-gva2-kf", cu=EDGES, ratio=2, stress="long_memory"),
    Case("split-fp16-longmem-softplus-T2100-kf", T=2100, gate="softplus", dtype="fp16", stress="long_memory"),
]


def _run(torch, fn, lib, x, c, split):
    out = torch.full_like(x["v"], math.nan)
    fso = torch.full(x["sshape"], math.nan, device=DEVICE)
    o, ht = _call(fn, x, c, output_final_state=True, library=lib, cu_seqlens_cpu=x["cu_seqlens_cpu"], out=out,
                  final_state_out=fso, split=split)
    torch.cuda.synchronize()
    bad = {"o": _nonfinite(o), "final_state": _nonfinite(ht)}
    assert not any(bad.values()), f"split={split}: NaN/Inf elements (unwritten or overflowed): {bad}"
    return o, ht


def _diff(torch, a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


@pytest.mark.parametrize("split", [2, 5])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_split_is_exact(chunk_lib, chunk_kda, ref, torch_cuda, seed, case: Case, split: int):
    torch = torch_cuda
    lib = chunk_lib
    require_built(lib, case)
    s = seed + 500 + CASES.index(case)
    x = to_torch(torch, draw(case, s, lib.k, lib.v), case, DEVICE)
    ctx = f"{case.id} split={split} [{lib.spec}] seed {s} (--seed={seed})"
    o1, h1 = _run(torch, chunk_kda, lib, x, case, 1)
    os_, hs = _run(torch, chunk_kda, lib, x, case, split)
    d_o, d_h = _diff(torch, os_, o1), _diff(torch, hs, h1)
    assert d_o <= SPLIT_TOL and d_h <= SPLIT_TOL, f"{ctx}: split vs unsplit relative L2 o {d_o:.2e}, state {d_h:.2e}"
    o_ref, ht_ref = ref.recurrent_kda_ref(
        x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
        initial_state=x["initial_state"], output_final_state=True, cu_seqlens=list(case.cu) if case.cu else None,
        **ref_options(case))
    for name, got, want in (("o", os_, o_ref), ("final state", hs, ht_ref)):
        err = _rel(ref, got, want)
        ok, bound = verdict(err, None)
        assert ok, f"{ctx}: {name} relative L2 vs float64 {err:.3e} > {bound:.3e}"


@pytest.mark.parametrize("stress", [None, "long_memory"])
def test_split_long_sequence(chunk_lib, chunk_kda, torch_cuda, seed, stress):
    """T = 65536 (1024 chunks) in 8 segments of 128 chunks: the same outputs as the unsplit pass."""
    torch = torch_cuda
    lib = chunk_lib
    modes = lib.features.gate_modes
    gate = next((m for m in ("softplus", "precomputed") if m in modes), None)
    if gate is None and stress:
        pytest.skip(f"[{lib.spec}] long-memory inputs need the softplus or precomputed gate; built: {list(modes)}")
    gate = gate or modes[0]
    c = Case(f"split-long-T65536-{stress or 'plain'}", T=65536, H=2, gate=gate, stress=stress,
             v_first="v_first" in lib.features.state_layouts, l2=lib.features.qk_l2norm,
             bsig=lib.features.beta_sigmoid)
    x = to_torch(torch, draw(c, seed + 599, lib.k, lib.v), c, DEVICE)
    o1, h1 = _run(torch, chunk_kda, lib, x, c, 1)
    o8, h8 = _run(torch, chunk_kda, lib, x, c, 8)
    d_o, d_h = _diff(torch, o8, o1), _diff(torch, h8, h1)
    assert d_o <= SPLIT_TOL and d_h <= SPLIT_TOL, f"{c.id} split 8 vs 1: o {d_o:.2e}, state {d_h:.2e}"


def test_split_argument_is_checked(chunk_lib, chunk_kda, torch_cuda, seed):
    from kda2.runtime import abi
    from kda2.runtime.errors import KDA2InputError

    torch = torch_cuda
    lib = chunk_lib
    c = Case("split-bad", T=100, gate=lib.features.gate_modes[0], v_first="v_first" in lib.features.state_layouts,
             l2=lib.features.qk_l2norm, bsig=lib.features.beta_sigmoid)
    x = to_torch(torch, draw(c, seed + 598, lib.k, lib.v), c, DEVICE)
    for bad in (0, -1, abi.MAX_SPLIT + 1, 2.0):
        with pytest.raises(KDA2InputError, match="split"):
            _call(chunk_kda, x, c, output_final_state=True, library=lib, split=bad)


def test_library_choice_is_the_planners_rule(chunk_lib, torch_cuda):
    """The library's own choice (split=None; templates/library.cpp.j2 choose_split) is kda2.plan.smem split_segments,
    read from the workspace the library asks for (the most any variant of the layout would take, at the library-wide
    cap) over a grid of few-chain and many-chain shapes: some number of state CTAs per SM for each variant (the
    driver's occupancy, which Python does not see) makes the rule give every shape's split. Long sequences over few
    heads split; P3's chains (they fill the GPU) do not."""
    from kda2.artifact.abi import KDA2RecurrentArgs
    from kda2.plan.smem import split_segments
    from kda2.runtime import abi

    torch = torch_cuda
    lib = chunk_lib
    K, V = lib.k, lib.v
    layout = "v_first" in lib.features.state_layouts
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    block_vs = sorted({int(v["config"]["block_v"]) for v in lib.manifest["variants"]
                       if (v["config"]["state_layout"] == "v_first") == layout})

    def chosen(N: int, T: int, HV: int) -> int:
        """The split whose workspace the library asks for (every split size differs)."""
        a = KDA2RecurrentArgs(N=N, T=T, H=HV, HV=HV, state_v_first=layout, split=0, max_seqlen=T)
        got = lib.workspace_bytes(a)
        sizes = {abi.chunk_workspace_bytes(N, T, HV, K, V, False, s): s for s in range(1, abi.MAX_SPLIT + 1)}
        assert got in sizes, f"N={N} T={T} HV={HV}: workspace {got} B is no split's"
        return sizes[got]

    heads = max(1, 128 // K)   # one 128-wide head's worth of columns (one head at K = 256)
    shapes = [(N, T, h * heads) for N in (1, 2) for T in (2048, 3072, 4096, 6144, 8192, 16384, 65536)
              for h in (1, 2, 4, 8, 12, 16, 32)] + [(8, 2048, 32 * heads)]
    got = {sh: chosen(*sh) for sh in shapes}
    assert got[(1, 16384, heads)] > 1 and got[(8, 2048, 32 * heads)] == 1, got

    def rule(N: int, T: int, HV: int, per_sm: tuple[int, ...]) -> int:
        return max(split_segments(N * HV * (K + V) // bv, sms * p, -(-T // 64), K) for bv, p in zip(block_vs, per_sm))

    fits = [p for p in itertools.product(range(1, 5), repeat=len(block_vs))
            if all(rule(*sh, p) == s for sh, s in got.items())]
    assert fits, {sh: (s, rule(*sh, (1,) * len(block_vs))) for sh, s in got.items()}


def test_each_rows_split_knob_bounds_the_librarys_choice(chunk_lib, chunk_kda, torch_cuda, seed):
    """A dispatch row's split knob (`split`: the agents' from the profile, or what kda2 tune timed fastest;
    kda2.plan.agents.chunk row_split) bounds the library's own choice for the row's calls: at the rows that serve one
    sequence (min_chains 0), one sequence of the bucket's length on one head, the split=None outputs are bit for bit
    those of an explicit split of at most that many segments — and not the unsplit ones where the row splits."""
    torch = torch_cuda
    lib = chunk_lib
    v_first = "v_first" in lib.features.state_layouts
    layout = "v_first" if v_first else "k_first"
    rows = [d for d in lib.dispatch if d["state_layout"] == layout and int(d["min_chains"]) == 0]
    assert rows and all("split" in d for d in rows), f"{lib.spec}: dispatch rows without a split knob (rebuild)"
    gate = "softplus" if "softplus" in lib.features.gate_modes else lib.features.gate_modes[0]
    for d in rows:
        T, cap = int(d["bucket"]), int(d["split"])
        c = Case(f"split-row-T{T}", T=T, H=1, gate=gate, v_first=v_first, l2=lib.features.qk_l2norm,
                 bsig=lib.features.beta_sigmoid)
        x = to_torch(torch, draw(c, seed + 597, lib.k, lib.v), c, DEVICE)
        chosen, _ = _run(torch, chunk_kda, lib, x, c, None)
        same = [s for s in range(1, cap + 1) if torch.equal(_run(torch, chunk_kda, lib, x, c, s)[0], chosen)]
        ctx = f"[{lib.spec}] {layout}<={T}/{d['class']} split<={cap} ({d['split_by']})"
        assert same, f"{ctx}: the library's choice matches no split of at most {cap} segments"
        if cap > 1:
            assert same != [1], f"{ctx}: one long sequence on one head left unsplit"
