"""The fused twin of a built chunk library (docs/DESIGN.md §1): a variant holding the fused 16-token kernel
(kda2/fused.cuh) beside its two kernels, launched by index (kda2_launch, as `kda2 tune` times it).

An unsplit call the library's rule gives the fused kernel (kda2.plan.smem fused_takes: dense, or varlen no more
uneven than FUSED_MAX_IMBALANCE_PCT) equals, bit for bit, the same header's check kernel's o and final state
(tests/kernels/fused_check.cu, which tests/gpu/test_fused_gpu.py holds to the fp64 reference and its rounding model) on
the same inputs, for every case of the chunk GPU tests (kda2/bench/cases.py CASES) — so the library launches that
kernel, with its block, shared memory and the call's arguments as they are; an uneven varlen call and an explicitly
split one run the two kernels (docs/DESIGN.md §1): within the fp64 reference's bar and not the fused kernel's bits; through
the dispatch (kda2_fwd), a row routed to a twin runs such a call on its fallback variant, bit for bit. Outputs are
poisoned with NaN first. Which library: --chunk-library (kimi_linear_chunk's every-candidate build has twins), else
the chunk builds under build/; a library without a twin skips, saying so. Skips without a GPU (conftest.py).
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

from kda2.bench.cases import CASES, TOL, Case, draw, ref_options, to_torch  # noqa: E402
from test_chunk_gpu import chunk_lib  # noqa: E402,F401 - fixture
from test_fused_gpu import call_options, fused  # noqa: E402,F401 - fixture

pytestmark = pytest.mark.gpu

SPLIT_CASES = [
    Case("twin-split-softplus-B2-T3000-vf", B=2, T=3000, gate="softplus", v_first=True),
    Case("twin-split-varlen-empty-len1-lowerbound-gva2-kf", cu=(0, 0, 1, 700, 701, 2600), ratio=2, gate="lower_bound"),
    Case("twin-split-longmem-softplus-T3000-kf", T=3000, gate="softplus", stress="long_memory"),
]


@pytest.fixture(scope="session")
def twins(chunk_lib) -> dict[str, int]:
    """{state layout: library index of its first fused twin}."""
    out: dict[str, int] = {}
    for v in chunk_lib.manifest["variants"]:
        if v["config"].get("fused"):
            out.setdefault(v["config"]["state_layout"], int(v["index"]))
    if not out:
        pytest.skip(f"{chunk_lib.manifest_path}: no fused twin built (agents.chunk.fused on sm_90a at K = V = 128; "
                    "`kda2 build --candidates all kimi_linear_chunk` builds them)")
    return out


def _twin_for(chunk_lib, twins, case: Case) -> int:
    layout = "v_first" if case.v_first else "k_first"
    if layout not in twins:
        pytest.skip(f"no {layout} fused twin in {chunk_lib.manifest_path}")
    f = chunk_lib.features
    if case.gate not in f.gate_modes or case.dtype not in f.input_dtypes:
        pytest.skip(f"{case.id}: gate {case.gate} / {case.dtype} not built into {chunk_lib.manifest_path}")
    return twins[layout]


def _poisoned(torch, x: dict, case: Case):
    o = torch.full_like(x["v"], math.nan)
    ht = torch.full(x["sshape"], math.nan, device="cuda") if case.final else None
    return o, ht


def _longest(x: dict, case: Case) -> int:
    cu = case.cu
    return max(b - e for e, b in zip(cu, cu[1:])) if cu else x["q"].shape[1]


def _launch(torch, lib, index: int, fused, x: dict, case: Case, split: int):
    """o, ht of one kda2_launch of variant `index` (split segments asked explicitly; 1: unsplit)."""
    o, ht = _poisoned(torch, x, case)
    a = fused.args(x["q"], x["k"], x["v"], x["g"], x["beta"], o=o, ht=ht, **call_options(x, case))
    a.max_seqlen = _longest(x, case)
    a.split = split
    ws = torch.empty(lib.workspace_bytes(a), dtype=torch.uint8, device="cuda")
    a.workspace, a.workspace_bytes = ws.data_ptr(), ws.numel()
    lib.launch_variant(index, a, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    return o, ht


def _within_bar(x: dict, case: Case, o, ht, what: str) -> None:
    from kda2 import reference as ref

    torch_ok = all(bool(t.isfinite().all()) for t in (o, ht) if t is not None)
    assert torch_ok, f"{case.id}: NaN/Inf after the {what} (unwritten or overflowed)"
    o_ref, ht_ref = ref.recurrent_kda_ref(
        x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
        initial_state=x["initial_state"], output_final_state=True, cu_seqlens=list(case.cu) if case.cu else None,
        **ref_options(case))
    e_o = ref.relative_l2(o.double().cpu().numpy(), o_ref)
    e_s = ref.relative_l2(ht.double().cpu().numpy(), ht_ref) if ht is not None else 0.0
    print(f"fused twin {what} {case.id}: o {e_o:.3e} state {e_s:.3e}")
    assert e_o <= TOL and e_s <= TOL, f"{case.id}: o {e_o:.3e}, state {e_s:.3e} (bar {TOL})"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_unsplit_call_is_the_fused_kernel_bit_for_bit(chunk_lib, twins, fused, torch_cuda, seed, case: Case):
    from kda2.plan.smem import fused_takes

    torch = torch_cuda
    index = _twin_for(chunk_lib, twins, case)
    seed = seed + CASES.index(case)
    x = to_torch(torch, draw(case, seed, 128, 128), case, "cuda")
    o_lib, ht_lib = _launch(torch, chunk_lib, index, fused, x, case, split=1)
    o_chk, ht_chk = _poisoned(torch, x, case)
    fused(x["q"], x["k"], x["v"], x["g"], x["beta"], o=o_chk, ht=ht_chk, **call_options(x, case))
    torch.cuda.synchronize()
    assert bool(torch.isfinite(o_chk).all()), f"{case.id}: the check kernel left NaN in o"
    n, total = (len(case.cu) - 1, case.cu[-1]) if case.cu else (1, 1)
    if not fused_takes(_longest(x, case), n, total, varlen=bool(case.cu)):
        # uneven varlen: the library's rule sends it to the two kernels
        _within_bar(x, case, o_lib, ht_lib, "uneven varlen call")
        assert not torch.equal(o_lib, o_chk), f"{case.id}: an uneven varlen call gave the fused kernel's bits"
        return
    for name, got, want in (("o", o_lib, o_chk), ("final state", ht_lib, ht_chk)):
        if want is None:
            continue
        assert torch.equal(got, want), (
            f"{case.id} seed {seed}: the twin's unsplit {name} differs from the fused check kernel's "
            f"({int((got != want).sum())} of {got.numel()} elements, "
            f"{int((~torch.isfinite(got)).sum())} non-finite): the library did not run the fused kernel as it is")


@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: c.id)
def test_split_call_runs_the_two_kernels(chunk_lib, twins, fused, torch_cuda, seed, case: Case):
    torch = torch_cuda
    index = _twin_for(chunk_lib, twins, case)
    x = to_torch(torch, draw(case, seed, 128, 128), case, "cuda")
    o2, ht2 = _launch(torch, chunk_lib, index, fused, x, case, split=2)
    o_chk, _ = _poisoned(torch, x, case)
    fused(x["q"], x["k"], x["v"], x["g"], x["beta"], o=o_chk, ht=None, **call_options(x, case))
    torch.cuda.synchronize()
    _within_bar(x, case, o2, ht2, "split 2 call")
    assert not torch.equal(o2, o_chk), f"{case.id}: the split call gave the fused kernel's bits (did it split?)"


def test_routed_uneven_call_runs_the_rows_fallback(chunk_lib, fused, torch_cuda, seed):
    """A dispatch row routed to a twin, with a fallback (kda2.plan.planner: the fastest non-twin the record timed at
    its class): an uneven varlen call of that row's shape, through the dispatch, gives the fallback variant's bits."""
    import kda2
    from test_chunk_gpu import _call

    torch = torch_cuda
    rows = [d for d in chunk_lib.manifest["dispatch"] if d.get("fallback_index", -1) >= 0]
    if not rows:
        pytest.skip(f"{chunk_lib.manifest_path}: no dispatch row routed to a twin has a fallback (a tuned routed build "
                    "has them where a twin won a class)")
    d = rows[0]
    # sequences up to the row's bucket, their longest twice the mean (the fused kernel does not take it), the row's
    # chains (its class's min_chains or more, below the next class's)
    lens = [d["bucket"], d["bucket"] // 8, d["bucket"] // 4, 16, d["bucket"] // 2, 1, 7, d["bucket"] // 16]
    heads = max(1, -(-max(d["min_chains"], 1) // len(lens)))
    cu = (0, *itertools.accumulate(lens))
    case = Case("twin-row-fallback", cu=cu, H=heads, gate="softplus", v_first=d["state_layout"] == "v_first")
    x = to_torch(torch, draw(case, seed + 77, 128, 128), case, "cuda")
    assert chunk_lib.route(case.v_first, max(lens), len(lens) * heads)["class"] == d["class"]
    o, ht = _poisoned(torch, x, case)
    o, ht = _call(kda2.chunk_kda, x, case, output_final_state=True, library=chunk_lib,
                  cu_seqlens_cpu=x["cu_seqlens_cpu"], out=o, final_state_out=ht)
    torch.cuda.synchronize()
    o_fb, ht_fb = _launch(torch, chunk_lib, d["fallback_index"], fused, x, case, split=1)
    _within_bar(x, case, o, ht, "routed uneven call")
    assert torch.equal(o, o_fb) and torch.equal(ht, ht_fb), (
        f"{d['class']}: the routed uneven call's bits are not the fallback {d['fallback']}'s")
