"""The built chunk-family KDA library (`kda2.chunk_kda`, chunkwise tensor-core prefill) on a GPU.

Every case: outputs poisoned with NaN (`out=`, `final_state_out=`), so an element the kernels fail to
write shows up; no NaN/Inf; inputs left untouched; relative L2 error of o and the final state vs the
float64 reference (kda2.reference.recurrent_kda_ref, same options) ≤ 5e-3 and ≤ 2 × FLA 0.6's error on
the same inputs + 1e-4 (the floor and the bar: kda2/bench/cases.py). FLA's `fla.ops.kda.chunk_kda`
runs on the very same tensors with the same options; a combination FLA rejects is recorded, and only
the 5e-3 bar applies to it. `--fla-cases` narrows the cases run on FLA. The per-case table (ours vs FLA,
o and state) is written to DIR/chunk-accuracy.json (+ .md) at the end of the module with `--results-dir DIR`.

Which library: --chunk-library, else $KDA2_LIBRARY when it names a chunk-family build, else every
chunk-family spec under build/ (best arch for this GPU). Inputs are random draws from --seed (default
fixed; the seed is in the header and in every failure). A case the library lacks is checked against its
spec file (feature_matrix.require_built). Without a GPU every test here skips (conftest.py). The options
are registered in tests/conftest.py.
"""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from feature_matrix import require_built  # noqa: E402
from kda2.bench.cases import (  # noqa: E402
    CASES, MODEL_FACTOR, Case, Row, draw, model_verdict, options, ref_options, to_torch, verdict, write_gpu_results,
)

pytestmark = pytest.mark.gpu

DEVICE = "cuda"  # one place, so the test bodies can be dry-run on the CPU with stand-in kernels
INPUTS = ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "initial_state", "cu_seqlens")
_ROWS: list[Row] = []


# ---- which library, which API --------------------------------------------------------------------
# `chunk_lib` is parametrized in conftest.py (pytest_generate_tests): --chunk-library, else $KDA2_LIBRARY
# when it names a chunk build, else every chunk-family spec under build/.

@pytest.fixture(scope="session")
def chunk_lib(request, torch_cuda):
    from kda2.runtime import loader
    from kda2.runtime.errors import ArtifactError

    if request.param == "<no chunk build>":
        pytest.fail(f"a GPU is present but no chunk-family library is built under {loader.build_dir()}: run "
                    "`scons` (kernel_specs/kimi_linear_chunk.yaml) or carry build/ before the GPU tests")
    try:
        lib = loader.load(request.param)
    except ArtifactError as exc:
        pytest.fail(f"a GPU is present but the chunk library is unusable: {exc}")
    assert lib.family == "chunk", f"{lib.manifest_path}: family {lib.family!r}, expected 'chunk'"
    return lib


@pytest.fixture(scope="session")
def chunk_kda(torch_cuda):
    """kda2.chunk_kda (FLA 0.6 `fla.ops.kda.chunk_kda` semantics)."""
    import kda2

    fn = getattr(kda2, "chunk_kda", None)
    if fn is None:
        try:
            from kda2.runtime import chunk_kda as fn  # type: ignore[attr-defined,no-redef]
        except ImportError as exc:
            pytest.fail(f"kda2.chunk_kda is not available in this kda2 ({exc})")
    return fn


@pytest.fixture(scope="session")
def fla_chunk(torch_cuda, pytestconfig, fla_cases):
    """(FLA 0.6 chunk_kda or None, status). The Triton path: FLA_FLASH_KDA=0 (FlashKDA is another anchor). With
    --fla-cases none no case is compared, so FLA is neither imported nor required (even with --require-gpu)."""
    if fla_cases == "none":
        return None, "not compared (--fla-cases)"
    os.environ.setdefault("FLA_FLASH_KDA", "0")
    try:
        from fla.ops.kda import chunk_kda as fla
    except Exception as exc:  # noqa: BLE001 - any import failure means "no FLA here"
        why = f"unavailable: {type(exc).__name__}: {exc}"
        if pytestconfig.getoption("require_gpu"):
            pytest.fail(f"--require-gpu but FLA is not importable ({why}); the 2x-FLA bar needs it "
                        "(scripts/gpu_check.sh installs .whl/fla_core-*.whl)")
        return None, why
    return fla, "ok"


@pytest.fixture(scope="module")
def accuracy_rows(torch_cuda, pytestconfig, seed):
    """Collects one Row per accuracy case; writes the table to --results-dir at the end of the module."""
    yield _ROWS
    out_dir = pytestconfig.getoption("results_dir")
    if out_dir and _ROWS:
        write_gpu_results(out_dir, list(_ROWS), torch_cuda, seed)


def _default_case(lib, id: str, **kw) -> Case:
    """A case this library builds: softplus gate (Kimi-Linear) if built, V-first state if built."""
    f = lib.features
    gate = "softplus" if "softplus" in f.gate_modes else f.gate_modes[0]
    return Case(id, gate=gate, v_first="v_first" in f.state_layouts, l2=f.qk_l2norm, bsig=f.beta_sigmoid, **kw)


def _call(fn, x: dict, c: Case, **kw):
    return fn(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["initial_state"],
              cu_seqlens=x["cu_seqlens"], A_log=x["A_log"], dt_bias=x["dt_bias"], **options(c), **kw)


def _modelled_prep_wu(lib) -> str | None:
    """The prep_wu every variant of the library shares (the rounding model takes one), or None when they differ."""
    from kda2.spec.knobs import knob

    kinds = {knob(v["config"], "prep_wu") for v in lib.manifest["variants"]}
    return kinds.pop() if len(kinds) == 1 else None


def _rel(ref, got, want) -> float:
    return ref.relative_l2(got.double().cpu().numpy(), want)


def _nonfinite(t) -> int:
    return int((~t.isfinite()).sum().item())


# ---- accuracy vs the fp64 reference and vs FLA ---------------------------------------------------

def _fla_wanted(case_id: str, want: str) -> bool:
    """--fla-cases (`want`): "all" (default), "none", or a comma list of case ids to run FLA on.

    FLA's Triton kernels compile on first use for every option set (over 100 s each on the H200 host, without
    a carried Triton cache), so a short device session may compare FLA on a representative subset; the
    other cases are then held to the 5e-3 bar only, and the table says so.
    """
    want = want.strip()
    if want == "all":
        return True
    if want == "none":
        return False
    return case_id in {w.strip() for w in want.split(",")}


@pytest.fixture(scope="session")
def fla_cases(pytestconfig) -> str:
    """--fla-cases, checked: an id that names no case is a typo that would silently compare nothing."""
    want = pytestconfig.getoption("fla_cases").strip()
    if want not in ("all", "none"):
        unknown = sorted({w.strip() for w in want.split(",")} - {c.id for c in CASES} - {""})
        if unknown:
            pytest.fail(f"--fla-cases names no such case: {', '.join(unknown)} (ids: kda2/bench/cases.py CASES)")
    return want


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_reference(chunk_lib, chunk_kda, fla_chunk, fla_cases, ref, torch_cuda, accuracy_rows, seed,
                           case: Case):
    torch = torch_cuda
    lib = chunk_lib
    require_built(lib, case)
    base, seed = seed, seed + CASES.index(case)
    x = to_torch(torch, draw(case, seed, lib.k, lib.v), case, DEVICE)
    before = {n: x[n].clone() for n in INPUTS if x[n] is not None}
    ctx = f"{case.id} [{lib.spec}] seed {seed} (--seed={base})"

    out = torch.full_like(x["v"], math.nan)
    fso = torch.full(x["sshape"], math.nan, device=DEVICE) if case.final else None
    o, ht = _call(chunk_kda, x, case, output_final_state=case.final, library=lib,
                  cu_seqlens_cpu=x["cu_seqlens_cpu"], out=out, final_state_out=fso)
    torch.cuda.synchronize()
    assert o is out, f"{ctx}: out= was given but another tensor was returned"
    assert (ht is fso) if case.final else (ht is None), f"{ctx}: final state not returned as final_state_out"
    bad = {name: _nonfinite(t) for name, t in (("o", o), ("final_state", ht)) if t is not None}
    assert not any(bad.values()), f"{ctx}: NaN/Inf elements (unwritten or overflowed): {bad}"
    for n, t in before.items():
        assert torch.equal(x[n], t), f"{ctx}: input {n} was modified"

    B, T = case.shape_BT
    row = Row(spec=lib.spec, case=case.id, B=B, T=T, H=case.H, HV=case.HV,
              cu_seqlens=list(case.cu) if case.cu else None, gate=case.gate, layout=case.layout, seed=seed)
    accuracy_rows.append(row)
    o_ref, ht_ref = ref.recurrent_kda_ref(
        x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
        initial_state=x["initial_state"], output_final_state=True, cu_seqlens=list(case.cu) if case.cu else None,
        **ref_options(case))
    row.ours_o = _rel(ref, o, o_ref)
    row.ours_state = _rel(ref, ht, ht_ref) if case.final else None
    prep_wu = _modelled_prep_wu(lib)
    if prep_wu is not None:   # the kernels' own rounding model on the same inputs (kda2.reference.chunk_model)
        from kda2.reference import chunk_model

        o_m, ht_m = chunk_model.forward(x["q"], x["k"], x["v"], x["g"], x["beta"], dtype=case.dtype, A_log=x["A_log"],
                                        dt_bias=x["dt_bias"], initial_state=x["initial_state"],
                                        cu_seqlens=x["cu_seqlens"], prep_wu=prep_wu, **ref_options(case))
        row.model_o = ref.relative_l2(o_m, o_ref)
        row.model_state = ref.relative_l2(ht_m, ht_ref) if case.final else None

    fla, status = fla_chunk
    row.fla_status = status
    if fla is not None and not _fla_wanted(case.id, fla_cases):
        fla, row.fla_status = None, "not compared (--fla-cases)"
    if fla is not None:
        try:
            with torch.no_grad():  # FLA 0.6: int64 cu_seqlens, fp32 initial_state (both already so)
                fo, fht = _call(fla, x, case, output_final_state=case.final, cu_seqlens_cpu=x["cu_seqlens_cpu"])
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - FLA rejecting a combination is a finding, not a failure
            row.fla_status = f"rejected: {type(exc).__name__}: {str(exc)[:200]}"
        else:
            if _nonfinite(fo) or (case.final and _nonfinite(fht)):
                row.fla_status = "non-finite output"
            else:
                row.fla_status = "ok"
                row.fla_o = _rel(ref, fo, o_ref)
                row.fla_state = _rel(ref, fht, ht_ref) if case.final else None
            del fo, fht

    ok_o, row.bound_o = verdict(row.ours_o, row.fla_o)
    ok_s, row.bound_state = verdict(row.ours_state, row.fla_state) if case.final else (True, None)
    ok_m = model_verdict(row.ours_o, row.model_o) and model_verdict(row.ours_state, row.model_state)
    row.ok = ok_o and ok_s and ok_m
    assert ok_o, (f"{ctx}: o relative L2 {row.ours_o:.3e} > bound {row.bound_o:.3e} "
                  f"(FLA {row.fla_o if row.fla_o is None else f'{row.fla_o:.3e}'}, {row.fla_status})")
    assert ok_s, (f"{ctx}: final state relative L2 {row.ours_state:.3e} > bound {row.bound_state:.3e} "
                  f"(FLA {row.fla_state if row.fla_state is None else f'{row.fla_state:.3e}'}, {row.fla_status})")
    assert ok_m, (f"{ctx}: o / final state relative L2 {row.ours_o:.3e} / {row.ours_state} over {MODEL_FACTOR} x the "
                  f"rounding model's {row.model_o:.3e} / {row.model_state} (prep_wu {prep_wu}): the kernel does not "
                  "round where its design says (kda2/reference/chunk_model.py), or one of them changed alone")


# ---- API behaviour -------------------------------------------------------------------------------

def test_allocating_call_equals_out_call(chunk_lib, chunk_kda, torch_cuda, seed):
    """Without out= the API allocates o (bf16, v's shape) and the fp32 final state; same bits as with out=;
    output_final_state=False returns None and the same o."""
    torch = torch_cuda
    lib = chunk_lib
    c = _default_case(lib, "alloc", B=2, T=130)
    x = to_torch(torch, draw(c, seed + 101, lib.k, lib.v), c, DEVICE)
    o1, h1 = _call(chunk_kda, x, c, output_final_state=True, library=lib)
    assert o1.dtype == torch.bfloat16 and tuple(o1.shape) == tuple(x["v"].shape) and o1.device == x["v"].device
    assert h1.dtype == torch.float32 and tuple(h1.shape) == x["sshape"]
    out, fso = torch.full_like(x["v"], math.nan), torch.full(x["sshape"], math.nan, device=DEVICE)
    o2, h2 = _call(chunk_kda, x, c, output_final_state=True, library=lib, out=out, final_state_out=fso)
    o3, h3 = _call(chunk_kda, x, c, output_final_state=False, library=lib)
    torch.cuda.synchronize()
    assert o2 is out and h2 is fso and h3 is None
    assert torch.equal(o1, o2) and torch.equal(h1, h2), "the same call gave different bits (non-deterministic?)"
    assert torch.equal(o1, o3), "output_final_state=False changed o"


def test_cuda_graph_replay_equals_eager(chunk_lib, chunk_kda, torch_cuda, seed):
    """A dense call captured in a CUDA graph replays to exactly the eager result, repeatedly."""
    torch = torch_cuda
    lib = chunk_lib
    c = _default_case(lib, "graph", B=2, T=200)
    x = to_torch(torch, draw(c, seed + 102, lib.k, lib.v), c, DEVICE)
    out, fso = torch.empty_like(x["v"]), torch.empty(x["sshape"], device=DEVICE)

    def step():
        _call(chunk_kda, x, c, output_final_state=True, library=lib, out=out, final_state_out=fso)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up off the capture path (module loads, first-use checks)
    torch.cuda.current_stream().wait_stream(side)
    step()
    torch.cuda.synchronize()
    o_eager, h_eager = out.clone(), fso.clone()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(2):
        out.fill_(math.nan)
        fso.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, o_eager) and torch.equal(fso, h_eager), "graph replay differs from eager"


def test_bad_inputs_raise_before_launch(chunk_lib, chunk_kda, torch_cuda, seed):
    """Each bad call raises KDA2InputError and leaves its poisoned out / final_state_out untouched."""
    torch = torch_cuda
    from kda2.runtime.errors import KDA2InputError

    lib = chunk_lib
    f = lib.features
    c = _default_case(lib, "bad", B=2, T=70)
    x = to_torch(torch, draw(c, seed + 103, lib.k, lib.v), c, DEVICE)
    B, T, H, K, V = 2, 70, c.H, lib.k, lib.v
    opts = options(c)
    good = {n: x[n] for n in ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "initial_state")}

    def heads(hv: int) -> dict:
        """v, g, beta, state with `hv` value heads (the rest of the call unchanged)."""
        s = (B, hv, V, K) if c.v_first else (B, hv, K, V)
        return dict(v=torch.zeros(B, T, hv, V, dtype=torch.bfloat16, device=DEVICE),
                    g=torch.zeros(B, T, hv, K, dtype=x["g"].dtype, device=DEVICE),
                    beta=torch.zeros(B, T, hv, dtype=x["beta"].dtype, device=DEVICE),
                    A_log=None if x["A_log"] is None else torch.zeros(hv, device=DEVICE),
                    dt_bias=None if x["dt_bias"] is None else torch.zeros(hv * K, device=DEVICE),
                    initial_state=torch.zeros(s, device=DEVICE))

    sshape = x["sshape"]
    # what is wrong -> (the change to a good call, a pattern the message must contain: the argument it names)
    bad_calls: dict[str, tuple[dict, str]] = {
        "g float16": (dict(g=x["g"].half()), r"\bg\b"),
        "v float32": (dict(v=x["v"].float()), r"\bv\b"),
        "q and k float32": (dict(q=x["q"].float(), k=x["k"].float()), r"\bq\b"),
        "HV % H != 0": (heads(H + 1), r"HV"),
        "initial_state N+1 rows": (dict(initial_state=torch.zeros((B + 1,) + sshape[1:], device=DEVICE)),
                                   "initial_state"),
        "initial_state last dim halved": (dict(initial_state=torch.zeros(sshape[:-1] + (sshape[-1] // 2,),
                                                                         device=DEVICE)), "initial_state"),
        "initial_state bfloat16": (dict(initial_state=x["initial_state"].bfloat16()), "initial_state"),
        "final_state_out wrong shape": (dict(final_state_out=torch.full((B + 1,) + sshape[1:], math.nan,
                                                                        device=DEVICE)), "final_state_out"),
        "out float32": (dict(out=torch.full(tuple(x["v"].shape), math.nan, device=DEVICE)), r"\bout\b"),
        "beta wrong shape": (dict(beta=x["beta"][:, :, :1].contiguous()), "beta"),
        "cu_seqlens with B=2": (dict(cu_seqlens=torch.tensor([0, 30, T], dtype=torch.int64, device=DEVICE),
                                     initial_state=None), r"cu_seqlens|B == 1"),
    }
    if H > 1:  # any HV / H runs (issue 13); HV not a multiple of H (here H > HV, too) is refused
        bad_calls["HV not a multiple of H"] = (heads(H - 1), "HV")
    if c.gate == "softplus":
        bad_calls["softplus gate without A_log"] = (dict(A_log=None), "A_log")
    if "lower_bound" in f.gate_modes:
        bad_calls["safe_gate with lower_bound=-6"] = (dict(lower_bound=-6.0, safe_gate=True, use_gate_in_kernel=True),
                                                      "lower_bound")

    for what, (change, names) in bad_calls.items():
        args = dict(good, **change)
        out = args.pop("out", None)
        if out is None:
            out = torch.full(tuple(args["v"].shape), math.nan, dtype=torch.bfloat16, device=DEVICE)
        hv = args["v"].shape[2]
        fso = args.pop("final_state_out", None)
        if fso is None:
            fso = torch.full((B, hv, V, K) if c.v_first else (B, hv, K, V), math.nan, device=DEVICE)
        kw = dict(opts)
        for o in ("lower_bound", "safe_gate", "use_gate_in_kernel"):
            if o in args:
                kw[o] = args.pop(o)
        cu = args.pop("cu_seqlens", None)
        with pytest.raises(KDA2InputError, match=names):
            chunk_kda(args["q"], args["k"], args["v"], args["g"], args["beta"], initial_state=args["initial_state"],
                      output_final_state=True, cu_seqlens=cu, A_log=args["A_log"], dt_bias=args["dt_bias"],
                      library=lib, out=out, final_state_out=fso, **kw)
        torch.cuda.synchronize()
        assert bool(out.isnan().all()), f"{what}: o was written by a refused call"
        assert bool(fso.isnan().all()), f"{what}: final_state_out was written by a refused call"


def test_varlen_device_only_cu_seqlens_and_bf16_gate_params(chunk_lib, chunk_kda, ref, torch_cuda, seed):
    """Issue 13, shared runtime: a varlen chunk_kda call with only the device cu_seqlens (no host copy, no
    max_seqlen) reads nothing back, so it captures in a CUDA graph; bf16 A_log / dt_bias are converted to the fp32
    the chunk kernels read. Replay matches the float64 reference (GVA ratio 3: any HV / H)."""
    torch = torch_cuda
    lib = chunk_lib
    c = _default_case(lib, "varlen-device-cu", cu=(0, 70, 71, 200), H=2, ratio=3)
    if not c.in_kernel_gate:
        pytest.skip(f"{lib.spec} builds no in-kernel gate")
    require_built(lib, c)
    x = to_torch(torch, draw(c, seed + 131, lib.k, lib.v), c, DEVICE)
    a16 = None if x["A_log"] is None else x["A_log"].bfloat16()
    d16 = None if x["dt_bias"] is None else x["dt_bias"].bfloat16()
    out, fso = torch.empty_like(x["v"]), torch.empty(x["sshape"], device=DEVICE)

    def step():
        chunk_kda(x["q"], x["k"], x["v"], x["g"], x["beta"], initial_state=x["initial_state"], output_final_state=True,
                  cu_seqlens=x["cu_seqlens"], A_log=a16, dt_bias=d16, library=lib, out=out, final_state_out=fso,
                  **options(c))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    out.fill_(math.nan)
    fso.fill_(math.nan)
    graph.replay()
    torch.cuda.synchronize()
    o_ref, ht_ref = ref.recurrent_kda_ref(
        x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=a16, dt_bias=d16, initial_state=x["initial_state"],
        output_final_state=True, cu_seqlens=list(c.cu), **ref_options(c))
    assert _nonfinite(out) == 0 and _nonfinite(fso) == 0, "unwritten outputs after replay"
    assert _rel(ref, out, o_ref) <= 5e-3 and _rel(ref, fso, ht_ref) <= 5e-3, (_rel(ref, out, o_ref),
                                                                              _rel(ref, fso, ht_ref))


def test_fp16_inputs_allocate_fp16_o_and_mixed_dtypes_raise(chunk_lib, chunk_kda, ref, torch_cuda, seed):
    """Issue 13, chunk family: fp16 q/k/v return an fp16 o (allocated) and the fp32 final state, within the bar of
    the fp64 reference; a call mixing bf16 and fp16 raises before any launch (poisoned outputs stay NaN). The
    accuracy cases with fp16 inputs (vs FLA too) are the fp16-* rows of kda2/bench/cases.py CASES."""
    torch = torch_cuda
    from kda2.runtime.errors import KDA2InputError

    lib = chunk_lib
    c = _default_case(lib, "fp16-api", B=2, T=130, dtype="fp16")
    require_built(lib, c)
    x = to_torch(torch, draw(c, seed + 141, lib.k, lib.v), c, DEVICE)
    o, ht = _call(chunk_kda, x, c, output_final_state=True, library=lib)
    torch.cuda.synchronize()
    assert o.dtype == torch.float16 and tuple(o.shape) == tuple(x["v"].shape) and ht.dtype == torch.float32
    assert _nonfinite(o) == 0 and _nonfinite(ht) == 0
    o_ref, ht_ref = ref.recurrent_kda_ref(
        x["q"], x["k"], x["v"], x["g"], x["beta"], A_log=x["A_log"], dt_bias=x["dt_bias"],
        initial_state=x["initial_state"], output_final_state=True, **ref_options(c))
    assert _rel(ref, o, o_ref) <= 5e-3 and _rel(ref, ht, ht_ref) <= 5e-3, (_rel(ref, o, o_ref), _rel(ref, ht, ht_ref))
    for what, change, names in (("v bf16", dict(v=x["v"].bfloat16()), r"\bv dtype"),
                                ("k bf16", dict(k=x["k"].bfloat16()), r"\bk dtype"),
                                ("g bf16", dict(g=x["g"].bfloat16()), r"\bg dtype"),
                                ("out bf16", dict(out=torch.full_like(x["v"], math.nan, dtype=torch.bfloat16)),
                                 r"\bout dtype")):
        args = dict(x, **change)
        out = change.get("out", torch.full_like(x["v"], math.nan))
        fso = torch.full(x["sshape"], math.nan, device=DEVICE)
        with pytest.raises(KDA2InputError, match=names):
            _call(chunk_kda, args, c, output_final_state=True, library=lib, out=out, final_state_out=fso)
        torch.cuda.synchronize()
        assert bool(out.isnan().all()) and bool(fso.isnan().all()), f"{what}: an output was written by a refused call"
