"""Issue 13 on a GPU: the recurrent library over input dtypes, gate-parameter dtypes, GVA ratios, layouts,
multi-token decode with per-token states, and varlen with only a device cu_seqlens under CUDA graph capture.

Runs once per built recurrent spec (tests/gpu/conftest.py: one per head-dim pair, K in {64, 128, 256}).
Every output is poisoned with NaN first. Bar (docs/DESIGN.md §1.1): relative L2 of o and of the states vs
the float64 reference <= 5e-3, tightened to 2x FLA's error + 1e-4 on the same inputs where FLA 0.6 is
importable and runs the case (kda2.bench.cases.bound). With --results-dir the matrix's errors, ours and
FLA's, go to recurrent-accuracy.{json,md} there (the chunk tests' table format). A case the library does
not build skips through feature_matrix.require_built (a failure where the spec file says it is built).
"""
from __future__ import annotations

import contextlib
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from feature_matrix import require_built  # noqa: E402
from test_recurrent_gpu import TOL, Case, assert_close, make_inputs, options, run_ref  # noqa: E402

#: (input dtype, gate-parameter dtype, GVA ratio, state layout): the full product, each a small softplus case.
MATRIX = [Case(f"{d}-p{p}-gva{r}-{'vf' if vf else 'kf'}", B=3, T=4, H=2 if r < 8 else 1,
               ratio=r, gate="softplus", v_first=vf, dtype=d, param=p, g_bf16=(r == 2), beta_bf16=(r == 4))
          for d, p, r, vf in itertools.product(("bf16", "fp16"), ("fp32", "bf16", "fp16"), (1, 2, 4, 8),
                                               (False, True))]


_ROWS: list = []


@pytest.fixture(scope="module")
def matrix_rows(torch_cuda, pytestconfig, seed):
    """Collects one accuracy Row per matrix case; writes the table to --results-dir at the end of the module."""
    yield _ROWS
    out_dir = pytestconfig.getoption("results_dir")
    if out_dir and _ROWS:
        from kda2.bench.cases import write_gpu_results

        write_gpu_results(out_dir, list(_ROWS), torch_cuda, seed, stem="recurrent-accuracy")


@pytest.fixture(scope="module")
def fla_recurrent(torch_cuda, pytestconfig):
    """(FLA 0.6's fused_recurrent_kda or None where FLA is not importable, --fla-recurrent). Without FLA the 5e-3
    bar applies alone; under --require-gpu a missing FLA fails unless --fla-recurrent=none."""
    want = pytestconfig.getoption("fla_recurrent")
    if want == "none":
        return None, want
    try:
        from fla.ops.kda import fused_recurrent_kda
    except Exception as exc:  # noqa: BLE001 - any import failure means "no FLA here"
        if pytestconfig.getoption("require_gpu"):
            pytest.fail(f"--require-gpu but FLA is not importable ({exc}); install .whl/fla_core-*.whl or pass "
                        "--fla-recurrent=none")
        return None, want
    return fused_recurrent_kda, want


def _fla_wanted(want: str, lib, c: Case) -> bool:
    """--fla-recurrent: kimi = the Kimi-Linear form FLA is built for (K=V=128, bf16 inputs, fp32 parameters)."""
    return want == "all" or (want == "kimi" and lib.k == lib.v == 128 and c.dtype == "bf16" and c.param == "fp32")


def _fla_errors(fla, ref, x: dict, c: Case, o_ref, ht_ref) -> tuple[float | None, float | None, str]:
    """FLA's relative L2 errors of (o, final state) on the same inputs, and what happened ("ok", "not run", or why
    FLA refused the case)."""
    if fla is None:
        return None, None, "not run"
    try:
        o, ht = fla(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
                    initial_state=None if x["initial_state"] is None else x["initial_state"].clone(),
                    output_final_state=True, cu_seqlens=x["cu_seqlens"], **options(c))
    except Exception as exc:  # noqa: BLE001 - FLA may not run every combination (e.g. fp16 inputs)
        return None, None, f"rejected: {type(exc).__name__}: {str(exc)[:200]}"
    ef = lambda got, want: ref.relative_l2(got.double().cpu().numpy(), want)  # noqa: E731
    return ef(o, o_ref), ef(ht, ht_ref), "ok"


@pytest.mark.parametrize("case", MATRIX, ids=lambda c: c.id)
def test_dtype_param_ratio_layout_matrix(lib, ref, torch_cuda, seed, fla_recurrent, matrix_rows, case: Case):
    torch = torch_cuda
    from kda2.bench.cases import Row, bound
    from kda2.runtime import fused_recurrent_kda

    require_built(lib, case)
    x = make_inputs(torch, lib, case, seed + 11)
    ctx = f"{case.id} [{lib.spec}, K={lib.k} V={lib.v}] --seed={seed}"
    out = torch.full_like(x["v"], math.nan)
    fso = torch.full(x["sshape"], math.nan, device="cuda")
    o, ht = fused_recurrent_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
                                initial_state=x["initial_state"], output_final_state=True, library=lib, out=out,
                                final_state_out=fso, **options(case))
    torch.cuda.synchronize()
    assert o.dtype == x["q"].dtype, f"{ctx}: o is {o.dtype}, not the input dtype"
    o_ref, ht_ref = run_ref(ref, x, case)
    fla, want = fla_recurrent
    fla_o, fla_s, status = _fla_errors(fla if _fla_wanted(want, lib, case) else None, ref, x, case, o_ref, ht_ref)
    row = Row(spec=lib.spec, case=f"{case.id} K{lib.k}", B=case.B, T=case.T, H=case.H, HV=case.H * case.ratio,
              cu_seqlens=None, gate=case.gate, layout="v_first" if case.v_first else "k_first", seed=seed + 11,
              fla_o=fla_o, fla_state=fla_s, fla_status=status, bound_o=bound(fla_o), bound_state=bound(fla_s))
    matrix_rows.append(row)
    row.ok = False  # until both errors are in: a failed assertion leaves the row marked
    row.ours_o = err_o = assert_close(ref, "o", o, o_ref, ctx)
    row.ours_state = err_s = assert_close(ref, "final_state", ht, ht_ref, ctx)
    row.ok = err_o <= row.bound_o and err_s <= row.bound_state
    kimi_form = lib.k == lib.v == 128 and case.dtype == "bf16" and case.param == "fp32" and case.ratio == 1
    assert not (kimi_form and status.startswith("rejected")), f"{ctx}: FLA refused its own form: {status}"
    assert err_o <= bound(fla_o), f"{ctx}: o error {err_o:.3e} > 2x FLA's {fla_o:.3e} + 1e-4"
    assert err_s <= bound(fla_s), f"{ctx}: state error {err_s:.3e} > 2x FLA's {fla_s:.3e} + 1e-4"


def _per_token_states(ref, x: dict, c: Case, rows0) -> np.ndarray:
    """[N, T, ...] float64: the reference state after every token, one token at a time from rows0 [N, ...]."""
    T = x["q"].shape[1]
    states, s = [], rows0
    for t in range(T):
        sl = {n: (x[n][:, t:t + 1] if x[n] is not None else None) for n in ("q", "k", "v", "g", "beta")}
        _, s = ref.recurrent_kda_ref(sl["q"], sl["k"], sl["v"], sl["g"], sl["beta"], A_log=x["A_log"],
                                     dt_bias=x["dt_bias"], initial_state=s, output_final_state=True, **options(c))
        states.append(s)
    return np.stack(states, axis=1)


@pytest.mark.parametrize("T", [2, 4, 8])
@pytest.mark.parametrize("v_first", [False, True], ids=["kf", "vf"])
def test_multi_token_decode_with_intermediate_states(lib, ref, torch_cuda, seed, T, v_first):
    """Speculative verify: T tokens per sequence from the state pool, each row read and written once, the state
    after every token kept in intermediate_states_out (rows of the pool not named stay untouched)."""
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda_pool

    f = lib.features
    gate = "softplus" if "softplus" in f.gate_modes else f.gate_modes[0]
    c = Case(f"mtp-T{T}", B=4, T=T, H=2, ratio=2, gate=gate, v_first=v_first,
             dtype="fp16" if "fp16" in f.input_dtypes else "bf16")
    require_built(lib, c)
    x = make_inputs(torch, lib, c, seed + 21)
    ctx = f"{c.id}-{'vf' if v_first else 'kf'} [{lib.spec}] --seed={seed}"
    P, slots = 7, [5, 0, -1, 2]
    pool = torch.randn((P,) + x["sshape"][1:], generator=torch.Generator(device="cuda").manual_seed(seed + 22),
                       device="cuda") * 0.1
    before = pool.clone()
    idx = torch.tensor(slots, dtype=torch.int32, device="cuda")
    out = torch.full_like(x["v"], math.nan)
    inter = torch.full((4, T) + x["sshape"][1:], math.nan, device="cuda")
    o = fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx, A_log=x["A_log"],
                                 dt_bias=x["dt_bias"], library=lib, out=out, intermediate_states_out=inter,
                                 **options(c))
    torch.cuda.synchronize()
    o_ref, pool_ref = run_ref(ref, x, c, initial_state=before, ssm_state_indices=np.array(slots))
    assert_close(ref, "o", o, o_ref, ctx)
    used = [s for s in slots if s >= 0]
    assert_close(ref, "pool rows", pool[used], pool_ref[used], ctx)
    for r in range(P):
        if r not in used:
            assert torch.equal(pool[r], before[r]), f"{ctx}: pool row {r} is not referenced but changed"
    live = [n for n, s in enumerate(slots) if s >= 0]
    rows0 = before[[slots[n] for n in live]]
    sub = {n: (x[n][live] if x[n] is not None and n in ("q", "k", "v", "g", "beta") else x[n]) for n in x}
    want = _per_token_states(ref, sub, c, rows0)
    assert_close(ref, "intermediate states", inter[live], want, ctx)
    assert torch.equal(inter[live][:, -1], pool[used]), f"{ctx}: the last intermediate state is not the pool row"


@pytest.mark.parametrize("v_first", [False, True], ids=["kf", "vf"])
def test_varlen_device_only_cu_seqlens_graph_replay(lib, ref, torch_cuda, seed, v_first):
    """Only a device cu_seqlens (no cu_seqlens_cpu, no max_seqlen): nothing is read back, so the call captures in
    a CUDA graph; replays with new values in the same buffers match the reference."""
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda

    f = lib.features
    gate = "softplus" if "softplus" in f.gate_modes else f.gate_modes[0]
    cu = (0, 5, 6, 30, 64)
    c = Case("graph-varlen-device-cu", cu=cu, ratio=2, gate=gate, v_first=v_first)
    require_built(lib, c)
    x = make_inputs(torch, lib, c, seed + 31)
    ctx = f"{c.id} [{lib.spec}] --seed={seed}"
    cu_dev = x["cu_seqlens"]
    out = torch.empty_like(x["v"])
    fso = torch.empty(x["sshape"], device="cuda")
    h0 = x["initial_state"].clone()
    call = lambda: fused_recurrent_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"],  # noqa: E731
                                       dt_bias=x["dt_bias"], initial_state=h0, output_final_state=True,
                                       cu_seqlens=cu_dev, library=lib, out=out, final_state_out=fso, **options(c))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()  # warm-up off the capture path
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for rep in range(2):  # new inputs in the captured buffers each replay
        y = make_inputs(torch, lib, c, seed + 40 + rep)
        for n in ("q", "k", "v", "g", "beta"):
            x[n].copy_(y[n])
        h0.copy_(y["initial_state"])
        out.fill_(math.nan)
        fso.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        o_ref, ht_ref = run_ref(ref, dict(y, A_log=x["A_log"], dt_bias=x["dt_bias"]), c)
        assert_close(ref, f"o (replay {rep})", out, o_ref, ctx)
        assert_close(ref, f"final_state (replay {rep})", fso, ht_ref, ctx)


def test_bad_dims_dtypes_ratios_raise_before_launch(lib, torch_cuda, seed):
    """Each bad call raises KDA2InputError naming what is allowed, and leaves every poisoned buffer untouched."""
    torch = torch_cuda
    from kda2.runtime import KDA2InputError, fused_recurrent_kda, fused_recurrent_kda_pool

    f = lib.features
    gate = "softplus" if "softplus" in f.gate_modes else f.gate_modes[0]
    c = Case("bad13", B=2, T=3, H=2, ratio=2, gate=gate, v_first="v_first" in f.state_layouts)
    x = make_inputs(torch, lib, c, seed + 51)
    out = torch.full_like(x["v"], math.nan)
    fso = torch.full(x["sshape"], math.nan, device="cuda")
    pool = torch.randn((3,) + x["sshape"][1:], device="cuda")
    before = pool.clone()
    idx = torch.tensor([0, 2], dtype=torch.int32, device="cuda")
    inter = torch.full((2, 3) + x["sshape"][1:], math.nan, device="cuda")
    good = dict(q=x["q"], k=x["k"], v=x["v"], g=x["g"], beta=x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"])
    K, V = lib.k, lib.v
    other = 32 if K != 32 else 64
    bad = {
        "fp32 inputs": (dict(q=x["q"].float(), k=x["k"].float(), v=x["v"].float()), "q dtype.*bfloat16|bf16"),
        "H > HV": (dict(q=x["q"].repeat(1, 1, 3, 1), k=x["k"].repeat(1, 1, 3, 1)), "HV"),
        "HV % H != 0": (dict(v=x["v"][:, :, :3].contiguous(), g=x["g"][:, :, :3].contiguous(),
                             beta=x["beta"][:, :, :3].contiguous()), "HV"),
        "K not built": (dict(q=x["q"][..., :other].contiguous(), k=x["k"][..., :other].contiguous()), "head dims"),
        "A_log float64": (dict(A_log=None if x["A_log"] is None else x["A_log"].double()), "A_log dtype: got float64"),
    }
    if "fp16" not in f.input_dtypes:
        bad["fp16 inputs (not built)"] = (dict(q=x["q"].half(), k=x["k"].half(), v=x["v"].half()), "fp16|input_dtypes")
    if x["A_log"] is None:
        bad.pop("A_log float64")  # (fp16 is taken: an fp32 copy, kda2.runtime.params)
    for what, (change, match) in bad.items():
        args = dict(good, **change)
        with pytest.raises(KDA2InputError, match=match):
            fused_recurrent_kda(**args, initial_state=x["initial_state"], output_final_state=True, library=lib,
                                out=out if what != "fp32 inputs" else None, final_state_out=fso, **options(c))
        with pytest.raises(KDA2InputError):
            fused_recurrent_kda_pool(**args, state_pool=pool, ssm_state_indices=idx, library=lib, **options(c))
    with pytest.raises(KDA2InputError, match="intermediate_states_out"):
        fused_recurrent_kda_pool(**good, state_pool=pool, ssm_state_indices=idx, library=lib, out=out,
                                 intermediate_states_out=inter[:, :2], **options(c))
    torch.cuda.synchronize()
    assert bool(out.isnan().all()) and bool(fso.isnan().all()) and bool(inter.isnan().all()), "an output was written"
    assert torch.equal(pool, before), "the state pool was written"
    assert TOL == 5e-3


_BF16_STATE_ROWS: list[dict] = []


@pytest.fixture(scope="module")
def bf16_state_rows(pytestconfig, torch_cuda):
    """Collects the bf16-state vs fp32-state errors; written to --results-dir/bf16-state-accuracy.json at the end."""
    yield _BF16_STATE_ROWS
    out_dir = pytestconfig.getoption("results_dir")
    if out_dir and _BF16_STATE_ROWS:
        import json

        path = Path(out_dir) / "bf16-state-accuracy.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"bar": TOL, "rows": _BF16_STATE_ROWS}, indent=1) + "\n")
        print(f"\nbf16 decode state accuracy -> {path}")


@pytest.mark.parametrize("T", [1, 4])
@pytest.mark.parametrize("v_first", [False, True], ids=["kf", "vf"])
def test_bf16_decode_state_error_vs_fp32(lib, ref, torch_cuda, seed, bf16_state_rows, T, v_first):
    """The opt-in bf16 decode state (features.bf16_decode_state): the same pool call with the pool in bf16 and in
    fp32 (the same values: the fp32 pool is the bf16 one widened), both against the float64 reference. Records both
    errors (bench/results via --results-dir); the bf16 run must meet the same 5e-3 bar."""
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda_pool

    f = lib.features
    if not f.bf16_decode_state:
        from feature_matrix import NotBuilt

        raise NotBuilt(f"not built into spec {lib.spec}: features.bf16_decode_state is false")
    gate = "softplus" if "softplus" in f.gate_modes else f.gate_modes[0]
    c = Case(f"bf16-state-T{T}", B=64, T=T, H=4, ratio=2, gate=gate, v_first=v_first)
    require_built(lib, c)
    x = make_inputs(torch, lib, c, seed + 61)
    ctx = f"{c.id}-{'vf' if v_first else 'kf'} [{lib.spec}] --seed={seed}"
    P = 80
    idx = torch.randperm(P, generator=torch.Generator().manual_seed(seed))[:64].to(torch.int32).cuda()
    pool16 = (torch.randn((P,) + x["sshape"][1:], generator=torch.Generator(device="cuda").manual_seed(seed + 62),
                          device="cuda") * 0.1).bfloat16()
    before = pool16.float()
    errs = {}
    for name, pool in (("fp32", before.clone()), ("bf16", pool16.clone())):
        out = torch.full_like(x["v"], math.nan)
        inter = torch.full((64, T) + x["sshape"][1:], math.nan, device="cuda", dtype=pool.dtype) if T > 1 else None
        fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx, A_log=x["A_log"],
                                 dt_bias=x["dt_bias"], library=lib, out=out, intermediate_states_out=inter,
                                 **options(c))
        torch.cuda.synchronize()
        o_ref, pool_ref = run_ref(ref, x, c, initial_state=before, ssm_state_indices=idx.cpu().numpy())
        used = idx.long()
        errs[name] = (assert_close(ref, f"o ({name} state)", out, o_ref, ctx),
                      assert_close(ref, f"pool rows ({name} state)", pool[used].float(), pool_ref[idx.cpu().numpy()],
                                   ctx))
        if inter is not None:
            assert bool(inter.isfinite().all()), f"{ctx}: per-token states not all written ({name})"
            assert torch.equal(inter[:, -1], pool[used]), f"{ctx}: last per-token state differs from the pool ({name})"
    bf16_state_rows.append({"spec": lib.spec, "K": lib.k, "V": lib.v, "T": T, "layout": "v_first" if v_first else
                            "k_first", "o_err_fp32_state": errs["fp32"][0], "o_err_bf16_state": errs["bf16"][0],
                            "state_err_fp32": errs["fp32"][1], "state_err_bf16": errs["bf16"][1], "seed": seed})


#: Every candidate of the multi-token decode buckets (the preload kernels among them: every token's inputs in shared
#: memory at CTA entry, the rest from global memory in the loop), each launched by index: T inside the bucket from
#: the state pool with per-token states and a padding slot, in the input, g / beta, parameter and state dtypes that
#: take other load paths; and calls longer than the bucket (dense T = 13, varlen 3, 9, 0 and 17 tokens), which the
#: kernels must run correctly too (a caller's max_seqlen hint is a promise, and kda2_launch takes any length).
MTP_CASES = {
    "T2-pool": dict(T=2, pool=True),
    "T4-pool-fp16-g16-b16-pbf16": dict(T=4, pool=True, dtype="fp16", g_bf16=True, beta_bf16=True, param="bf16"),
    "T8-pool-bf16state-lowerbound": dict(T=8, pool=True, gate="lower_bound", state_bf16=True),
    "T13-dense-precomputed-nol2-nobsig": dict(T=13, gate="precomputed", l2=False, bsig=False),
    "varlen-3-9-0-17-negeig": dict(cu=(0, 3, 12, 12, 29), neg=True),
}


@pytest.mark.parametrize("v_first", [False, True], ids=["kf", "vf"])
@pytest.mark.parametrize("name", list(MTP_CASES))
def test_every_multi_token_candidate_by_index(lib, ref, torch_cuda, seed, monkeypatch, name, v_first):
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda, fused_recurrent_kda_pool

    spec = dict(MTP_CASES[name])
    pool, state_bf16 = spec.pop("pool", False), spec.pop("state_bf16", False)
    f = lib.features
    spec.setdefault("gate", "softplus" if "softplus" in f.gate_modes else f.gate_modes[0])
    c = Case(f"mtp-{name}", B=4, H=2, ratio=2, v_first=v_first, **spec)
    require_built(lib, c)
    if state_bf16 and not f.bf16_decode_state:
        from feature_matrix import NotBuilt

        raise NotBuilt(f"not built into spec {lib.spec}: features.bf16_decode_state is false")
    layout = "v_first" if v_first else "k_first"
    cands = [v for v in lib.variants if v["config"]["state_layout"] == layout and v["config"].get("intermediate")]
    if not cands:
        from feature_matrix import NotBuilt

        raise NotBuilt(f"not built into spec {lib.spec}: no multi-token decode bucket")
    x = make_inputs(torch, lib, c, seed + 71)
    ctx = f"{c.id}-{'vf' if v_first else 'kf'} [{lib.spec}] --seed={seed}"
    sdtype = torch.bfloat16 if state_bf16 else torch.float32
    N = len(c.cu) - 1 if c.cu else c.B
    if pool:
        P, slots = 7, [5, 0, -1, 2]
        pool0 = (torch.randn((P,) + x["sshape"][1:], generator=torch.Generator(device="cuda").manual_seed(seed + 72),
                             device="cuda") * 0.1).to(sdtype)
        live = [n for n, s in enumerate(slots) if s >= 0]
        o_ref, pool_ref = run_ref(ref, x, c, initial_state=pool0.float(), ssm_state_indices=np.array(slots))
        sub = {n: (x[n][live] if x[n] is not None and n in ("q", "k", "v", "g", "beta") else x[n]) for n in x}
        inter_ref = _per_token_states(ref, sub, c, pool0.float()[[slots[n] for n in live]])
    else:
        o_ref, ht_ref = run_ref(ref, x, c)
    failures, preloaded = [], 0
    for v in cands:
        idx = int(v["index"])
        preloaded += bool(v["config"].get("preload"))
        with monkeypatch.context() as m:  # the API validates as ever; only the dispatch table's pick is replaced
            m.setattr(lib, "_fwd", lambda args, max_seqlen, stream, i=idx: lib._launch(i, args, stream))
            out = torch.full_like(x["v"], math.nan)
            try:
                if pool:
                    rows = pool0.clone()
                    inter = torch.full((N, c.T) + x["sshape"][1:], math.nan, device="cuda", dtype=sdtype)
                    fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], rows,
                                             torch.tensor(slots, dtype=torch.int32, device="cuda"), A_log=x["A_log"],
                                             dt_bias=x["dt_bias"], library=lib, out=out, intermediate_states_out=inter,
                                             **options(c))
                    torch.cuda.synchronize()
                    used = [s for s in slots if s >= 0]
                    assert_close(ref, "o", out, o_ref, ctx)
                    assert_close(ref, "pool rows", rows[used].float(), pool_ref[used], ctx)
                    for r in range(P):
                        if r not in used:
                            assert torch.equal(rows[r], pool0[r]), f"pool row {r} is not referenced but changed"
                    assert_close(ref, "intermediate states", inter[live].float(), inter_ref, ctx)
                    assert torch.equal(inter[live][:, -1], rows[used]), "the last per-token state is not the pool row"
                    assert bool((out[slots.index(-1)] == 0).all()), "a padding slot must output zeros"
                else:
                    fso = torch.full(x["sshape"], math.nan, device="cuda")
                    fused_recurrent_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"],
                                        dt_bias=x["dt_bias"], initial_state=x["initial_state"],
                                        output_final_state=True, cu_seqlens=x["cu_seqlens"], library=lib, out=out,
                                        final_state_out=fso, **options(c))
                    torch.cuda.synchronize()
                    assert_close(ref, "o", out, o_ref, ctx)
                    assert_close(ref, "final_state", fso, ht_ref, ctx)
            except AssertionError as exc:
                failures.append(f"variant {v['index']} {v['id']} ({v.get('name', '')}): {exc}")
    assert not failures, "\n".join(failures)
    print(f"\n[{lib.spec}/{lib.arch}] {c.id}-{layout}: {len(cands)} multi-token candidates ({preloaded} preload) match")


# ---- persistent decode kernels (issue 13 item 5) -------------------------------------------------------------

@contextlib.contextmanager
def _forced(lib, index: int):
    """Every call of the runtime API launches variant `index` (kda2_launch) instead of the routed one: a persistent
    variant is a tuning candidate that a route may or may not pick, and it must be right either way."""
    fwd = lib._fwd
    lib._fwd = lambda args, max_seqlen, stream: lib._launch(index, args, stream)
    try:
        yield
    finally:
        lib._fwd = fwd


#: Decode variant kinds a route may or may not pick, each forced by index below: the persistent kernels
#: (agents.schedule), the bulk-staged ones (agents.staging: bulk, sm_90) and the one-token preload kernels
#: (agents.inputs: preload at T = 1; the multi-token ones are forced above).
FORCED_KINDS = {"persistent": ("agents.schedule", lambda c: c.get("persistent")),
                "bulk": ("agents.staging", lambda c: c.get("staging") == "bulk"),
                "preload": ("agents.inputs", lambda c: c.get("preload") == 1)}


def _forced_variants(lib, v_first: bool, kind: str) -> list[dict]:
    from feature_matrix import NotBuilt

    layout = "v_first" if v_first else "k_first"
    if layout not in lib.features.state_layouts:
        raise NotBuilt(f"not built into spec {lib.spec}: state layout {layout}")
    knob, pick = FORCED_KINDS[kind]
    found = [v for v in lib.variants if pick(v.get("config", {})) and v["config"]["state_layout"] == layout]
    if not found:
        raise NotBuilt(f"not built into spec {lib.spec}: no {kind} {layout} variant ({knob})")
    return found


#: Pool case of the persistent test: N sequences at HV = 8, so a tile grid of 2048 and more tiles (V / BV >= 1)
#: is several tiles per resident CTA on any GPU (register-bound persistent CTAs: a few per SM).
PERSISTENT_N = 256


@pytest.mark.parametrize("kind", list(FORCED_KINDS))
@pytest.mark.parametrize("v_first", [False, True], ids=["kf", "vf"])
def test_forced_decode_variants_pool_decode_with_padding(lib, ref, torch_cuda, seed, v_first, kind):
    """Every persistent (bulk-staged) variant, forced, on a T = 1 pool call whose tiles outnumber the resident CTAs:
    the tile loop, the next-tile copies and the pool rows read a tile ahead (the tile's bulk copies in and out of
    shared memory). Sequences map to a permutation of a larger pool with padding slots (-1: zero output, no row
    touched); fp32 pool, and the bf16 pool where the spec builds it."""
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda_pool

    variants = _forced_variants(lib, v_first, kind)
    f = lib.features
    gate = "softplus" if "softplus" in f.gate_modes else f.gate_modes[0]
    c = Case("forced-pool", B=PERSISTENT_N, T=1, H=4, ratio=2, gate=gate, v_first=v_first)
    require_built(lib, c)
    x = make_inputs(torch, lib, c, seed + 71)
    P = PERSISTENT_N + 40
    perm = torch.randperm(P, generator=torch.Generator().manual_seed(seed + 72))[:PERSISTENT_N]
    slots = [-1 if n % 7 == 3 else int(r) for n, r in enumerate(perm)]
    idx = torch.tensor(slots, dtype=torch.int32, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(seed + 73)
    pools = {"fp32": torch.randn((P,) + x["sshape"][1:], generator=gen, device="cuda") * 0.1}
    if f.bf16_decode_state:
        pools = {"fp32": pools["fp32"].bfloat16().float(), "bf16": pools["fp32"].bfloat16()}
    before = pools["fp32"].clone()
    o_ref, pool_ref = run_ref(ref, x, c, initial_state=before, ssm_state_indices=np.array(slots))
    used = [s for s in slots if s >= 0]
    pad = [n for n, s in enumerate(slots) if s < 0]
    for v in variants:
        for name, pool0 in pools.items():
            ctx = f"{kind} {v['id']} {name} pool [{lib.spec}] --seed={seed}"
            pool = pool0.clone()
            out = torch.full_like(x["v"], math.nan)
            with _forced(lib, int(v["index"])):
                fused_recurrent_kda_pool(x["q"], x["k"], x["v"], x["g"], x["beta"], pool, idx, A_log=x["A_log"],
                                         dt_bias=x["dt_bias"], library=lib, out=out, **options(c))
            torch.cuda.synchronize()
            assert_close(ref, "o", out, o_ref, ctx)
            assert_close(ref, "pool rows", pool[used].float(), pool_ref[used], ctx)
            assert bool((out[pad] == 0).all()), f"{ctx}: a padding slot's output is not zero"
            untouched = [r for r in range(P) if r not in set(used)]
            assert torch.equal(pool[untouched], pool0[untouched]), f"{ctx}: a pool row no sequence names changed"


@pytest.mark.parametrize("kind", list(FORCED_KINDS))
@pytest.mark.parametrize("v_first", [False, True], ids=["kf", "vf"])
def test_forced_decode_variants_dense_and_varlen_forms(lib, ref, torch_cuda, seed, v_first, kind):
    """The persistent (bulk-staged) variants, forced, beyond their bucket's calls: three tokens per sequence from no
    initial state (h0 == nullptr) in 16-bit inputs and gate parameters where built; varlen with an empty sequence
    and no final state (ht == nullptr: the state is read, never written)."""
    torch = torch_cuda
    from kda2.runtime import fused_recurrent_kda

    variants = _forced_variants(lib, v_first, kind)
    f = lib.features
    gate = "softplus" if "softplus" in f.gate_modes else f.gate_modes[0]
    dense = Case("forced-T3-noh0", B=PERSISTENT_N // 2, T=3, H=4, ratio=2, gate=gate, v_first=v_first, h0=False,
                 dtype="fp16" if "fp16" in f.input_dtypes else "bf16", param="bf16", g_bf16=True, beta_bf16=True)
    cu = tuple(int(t) for t in np.cumsum([0] + [(n * 5) % 4 for n in range(PERSISTENT_N)]))  # lengths 0..3
    var = Case("forced-varlen-noht", cu=cu, H=4, ratio=2, gate=gate, v_first=v_first, final=False)
    for c in (dense, var):
        require_built(lib, c)
        x = make_inputs(torch, lib, c, seed + 81)
        o_ref, ht_ref = run_ref(ref, x, c)
        h0 = None if x["initial_state"] is None else x["initial_state"].clone()
        for v in variants:
            ctx = f"{kind} {v['id']} {c.id} [{lib.spec}] --seed={seed}"
            out = torch.full_like(x["v"], math.nan)
            fso = torch.full(x["sshape"], math.nan, device="cuda") if c.final else None
            with _forced(lib, int(v["index"])):
                o, ht = fused_recurrent_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"],
                                            dt_bias=x["dt_bias"], initial_state=h0, output_final_state=c.final,
                                            cu_seqlens=x["cu_seqlens"], library=lib, out=out, final_state_out=fso,
                                            **options(c))
            torch.cuda.synchronize()
            assert_close(ref, "o", o, o_ref, ctx)
            if c.final:
                assert_close(ref, "final_state", ht, ht_ref, ctx)
            if h0 is not None:
                assert torch.equal(h0, x["initial_state"]), f"{ctx}: the initial state was written"
