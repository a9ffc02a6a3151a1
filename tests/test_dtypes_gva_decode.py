"""Issue 13 without a GPU: input and gate-parameter dtypes, any GVA ratio, head dims, multi-token decode with
per-token states, varlen without a host read, as the spec, the planner, the C library's checks and the
torch API see them. Every refusal happens before any launch (the fake library counts launches).

Tests that take torch skip where it is not installed (the GPU host has it); the spec, planner and real-build
tests need only the build dependencies.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from test_runtime_cpu import (CC, FEATURES, _expect, _FakeCuda, _hooks, _inputs,  # noqa: E402
                              make_fake_build)

from kda2.runtime import abi, loader  # noqa: E402
from kda2.runtime.errors import ArtifactError, KDA2InputError  # noqa: E402

needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler to build the fake library")
F16_FEATURES = dict(FEATURES, input_dtypes=["bf16", "fp16"], bf16_decode_state=True)


# --- spec and planner ---------------------------------------------------------------------------------

def _spec_doc(family: str = "recurrent") -> dict:
    import yaml

    return yaml.safe_load((ROOT / "kernel_specs" / ("kimi_linear_recurrent.yaml" if family == "recurrent"
                                                    else "kimi_linear_chunk.yaml")).read_text())


def test_spec_input_dtypes_both_families():
    from pydantic import ValidationError

    from kda2.spec.model import validate_spec

    for family in ("recurrent", "chunk"):  # the chunk family too (issue 13's chunk part)
        doc = _spec_doc(family)
        assert list(validate_spec(doc).features.input_dtypes) == ["bf16", "fp16"]
        doc["features"]["input_dtypes"] = ["fp32"]
        with pytest.raises(ValidationError):
            validate_spec(doc)
        del doc["features"]["input_dtypes"]
        assert list(validate_spec(doc).features.input_dtypes) == ["bf16"]  # the default


def test_gva_ratios_split_no_kernel_and_dtypes_do_not_either():
    """GVA ratios are a run-time argument: listing more of them changes no config; input dtypes are entries of
    one kernel (one cubin), not more kernels."""
    from kda2.plan.planner import plan_spec
    from kda2.spec.model import validate_spec

    doc = _spec_doc()
    base = plan_spec(validate_spec(doc), "sm_90a", [])
    doc["features"]["gva_ratios"] = [1, 2, 3, 4, 8, 16]
    more = plan_spec(validate_spec(doc), "sm_90a", [])
    assert [v.id for v in more.variants] == [v.id for v in base.variants]
    doc["features"]["input_dtypes"] = ["bf16"]
    bf16 = plan_spec(validate_spec(doc), "sm_90a", [])
    assert len(bf16.variants) == len(base.variants)
    assert all(v.config["dtypes"] == ["bf16", "fp16"] for v in base.variants)


def test_intermediate_states_only_in_decode_like_buckets():
    from kda2.plan.agents.recurrent import DECODE_MAX_T
    from kda2.plan.planner import plan_spec
    from kda2.spec.model import validate_spec

    plan = plan_spec(validate_spec(_spec_doc()), "sm_90a", [])
    by_id = {v.id: v for v in plan.variants}
    for row in plan.dispatch:
        for vid in row["candidates"]:
            # multi-token decode only: a T = 1 kernel's only state is its final one (and the code costs it time)
            assert by_id[vid].config["intermediate"] is (1 < row["bucket"] <= DECODE_MAX_T), row
    assert 8 in [row["bucket"] for row in plan.dispatch], "the multi-token decode bucket is in the default spec"


def test_render_one_entry_per_input_dtype():
    from kda2.codegen.render import kernel_symbols, render_variant
    from kda2.plan.planner import plan_spec
    from kda2.spec.model import validate_spec

    plan = plan_spec(validate_spec(_spec_doc()), "sm_90a", [])
    decode = next(v for v in plan.variants if v.config["intermediate"])
    prefill = next(v for v in plan.variants if v.config["prefetch"] and not v.config["intermediate"])
    assert decode.config["state_dtypes"] == ["fp32", "bf16"] and prefill.config["state_dtypes"] == ["fp32"]
    text = render_variant(decode.config, {"smem_stride": 1, "stage_row": 20})
    i = decode.id
    assert kernel_symbols(decode.config) == (f"kda2_recurrent_{i}", f"kda2_recurrent_f16_{i}",
                                             f"kda2_recurrent_s16_{i}", f"kda2_recurrent_f16_s16_{i}")
    for elem, state in (("__nv_bfloat16", "float"), ("__half", "float"), ("__nv_bfloat16", "__nv_bfloat16"),
                        ("__half", "__nv_bfloat16")):
        assert f"Kernel<kda2_{i}::Config, {elem}, {state}>::run(a);" in text
    assert "static constexpr bool INTERMEDIATE = true;" in text
    assert len(kernel_symbols(prefill.config)) == 2


# --- the real build's C checks (no driver here: a call that passes the checks returns ERR_DRIVER) ------

REAL = sorted((ROOT / "build").glob("*/*/manifest.json"))


@pytest.mark.parametrize("manifest", REAL or [None], ids=lambda p: "/".join(p.parts[-3:-1]) if p else "none")
def test_real_build_refuses_before_the_driver(manifest):
    if manifest is None:
        pytest.skip("no build/<spec>/<arch>/manifest.json (run `scons` first)")
    lib = loader.load(manifest)
    layout = lib.features.state_layouts[0]
    index = next(d["index"] for d in lib.dispatch if d["state_layout"] == layout)
    has_inter = bool(lib.variants[index]["config"].get("intermediate"))
    from kda2.artifact.abi import GATE_MODES

    gated = [GATE_MODES[m] for m in lib.features.gate_modes if m != "precomputed"]

    def rc(**kw) -> int:
        a = abi.KDA2RecurrentArgs(N=2, T=1, H=2, HV=4, gate_mode=GATE_MODES[lib.features.gate_modes[0]],
                                  state_v_first=int(layout == "v_first"))
        for k, v in kw.items():
            setattr(a, k, v)
        return lib._launch(index, ctypes_addr(a), None)

    passed = (abi.ERR_DRIVER, abi.ERR_WORKSPACE, abi.ERR_NO_CONTEXT)  # checks passed; then no driver / workspace
    assert rc() in passed
    assert rc(H=2, HV=6) in passed, "any integer ratio HV / H runs"
    assert rc(H=4, HV=2) == abi.ERR_SHAPE and rc(H=2, HV=5) == abi.ERR_SHAPE
    fp16 = "fp16" in lib.features.input_dtypes
    assert (rc(flags=abi.FLAG_INPUT_FP16) in passed) is fp16
    if not fp16:
        assert rc(flags=abi.FLAG_INPUT_FP16) == abi.ERR_DTYPE
    if gated:
        params = rc(gate_mode=gated[0], flags=abi.FLAG_HAS_A_LOG | abi.FLAG_A_LOG_BF16, A_log=0x1000)
        assert (params in passed) if lib.family == "recurrent" else params == abi.ERR_DTYPE
    inter = rc(intermediate=0x2000)
    assert (inter in passed) if has_inter else inter == abi.ERR_FEATURE
    if lib.family == "recurrent" and "k_first" in lib.features.state_layouts:
        buckets = [b for b in lib.buckets if 1 < b <= 16]
        assert lib.intermediate_max_t(False) == (max(buckets) if buckets else 0)
        assert lib.intermediate_min_t(False) == (min(buckets) if buckets else 0)


def ctypes_addr(a) -> int:
    import ctypes

    return ctypes.addressof(a)


# --- torch API (CPU tensors into the fake library; the device check is stubbed or comes last) ------------

@pytest.fixture
def f16_env(tmp_path):
    torch = pytest.importorskip("torch")
    if CC is None:
        pytest.skip("no C compiler to build the fake library")
    from kda2.runtime import api
    lib = loader.load(make_fake_build(tmp_path / "build", spec="f16", features=F16_FEATURES, buckets=(1, 8, 64),
                                      intermediate_buckets=(1, 8), bf16_state_buckets=(1, 8)))
    api._init_torch()
    api._fast.clear()
    yield torch, api, lib, _hooks(lib)
    api._fast.clear()


def _half(x: dict, torch) -> dict:
    return dict(x, q=x["q"].half(), k=x["k"].half(), v=x["v"].half())


def test_fp16_inputs_bf16_params_any_ratio_fill_the_args(f16_env, monkeypatch):
    torch, api, lib, d = f16_env
    _FakeCuda(monkeypatch, api, lib)
    x = _half(_inputs(torch, B=2, T=3, H=2, HV=6, g_dtype=torch.float16, beta_dtype=torch.float16), torch)
    A_log, dt_bias = torch.zeros(6, dtype=torch.bfloat16), torch.zeros(6 * 128, dtype=torch.bfloat16)
    o, _ = api.fused_recurrent_kda(*x.values(), A_log=A_log, dt_bias=dt_bias, use_gate_in_kernel=True, library=lib)
    a = d.kda2_test_last().contents
    assert o.dtype == torch.float16 and (a.H, a.HV) == (2, 6)
    assert a.flags == (abi.FLAG_INPUT_FP16 | abi.FLAG_G_BF16 | abi.FLAG_BETA_BF16 | abi.FLAG_HAS_A_LOG
                       | abi.FLAG_A_LOG_BF16 | abi.FLAG_HAS_DT_BIAS | abi.FLAG_DT_BIAS_BF16)
    assert a.A_log == A_log.data_ptr() and a.dt_bias == dt_bias.data_ptr() and a.intermediate is None
    # bf16 inputs on the same library: no fp16 flag; fp32 g / beta, fp32 parameters
    api.fused_recurrent_kda(*_inputs(torch, H=2, HV=6).values(), A_log=A_log.float(), use_gate_in_kernel=True,
                            library=lib)
    assert d.kda2_test_last().contents.flags == abi.FLAG_HAS_A_LOG


def test_fp16_gate_parameters_become_fp32(f16_env, monkeypatch):
    """A model cast with .half() has fp16 A_log / dt_bias (FLA reads any float dtype): the recurrent kernels read
    fp32 or bf16, so they get fp32 copies (no bf16 flags, other pointers), per call and in a prepared pool."""
    torch, api, lib, d = f16_env
    _FakeCuda(monkeypatch, api, lib)
    x = _half(_inputs(torch, B=2, T=3, H=2, HV=6, g_dtype=torch.float16, beta_dtype=torch.float16), torch)
    A_log, dt_bias = torch.zeros(6, dtype=torch.float16), torch.zeros(6 * 128, dtype=torch.float16)
    for _ in range(2):   # the second call takes the fast path
        api.fused_recurrent_kda(*x.values(), A_log=A_log, dt_bias=dt_bias, use_gate_in_kernel=True, library=lib)
        a = d.kda2_test_last().contents
        assert a.flags & (abi.FLAG_HAS_A_LOG | abi.FLAG_HAS_DT_BIAS) == abi.FLAG_HAS_A_LOG | abi.FLAG_HAS_DT_BIAS
        assert not a.flags & (abi.FLAG_A_LOG_BF16 | abi.FLAG_DT_BIAS_BF16)
        assert a.A_log not in (0, A_log.data_ptr()) and a.dt_bias not in (0, dt_bias.data_ptr())
    from kda2.runtime.prepared import prepare_pool
    pool = torch.zeros(4, 6, 128, 128)
    idx = torch.arange(2, dtype=torch.int32)
    p = prepare_pool(*x.values(), pool, idx, A_log=A_log, dt_bias=dt_bias, use_gate_in_kernel=True, library=lib)
    assert all(t.dtype == torch.float32 for t in p._keep)
    assert (p._a_ptr, p._d_ptr) == tuple(t.data_ptr() for t in p._keep)


def test_dtype_refusals_before_launch(f16_env):
    torch, api, lib, d = f16_env
    x = _inputs(torch)
    h = _half(x, torch)
    out = torch.full(tuple(x["v"].shape), math.nan, dtype=torch.bfloat16)
    e = lambda match, *a, **kw: _expect(api, lib, d, match, *a, poisoned=(out,), **kw)  # noqa: E731
    e(r"q dtype: got float32; allowed: bf16 or fp16 .*cast q/k/v", x["q"].float(), *list(x.values())[1:])
    e(r"k dtype: got float16; allowed: bfloat16", x["q"], h["k"], *list(x.values())[2:])
    e(r"g dtype: got bfloat16; allowed: float32 or float16", *list(h.values())[:3], x["g"].bfloat16(), x["beta"])
    e(r"out dtype: got bfloat16; allowed: float16", *h.values(), out=out)
    e(r"A_log dtype: got float64", *x.values(), use_gate_in_kernel=True, A_log=torch.zeros(4, dtype=torch.float64))


def test_intermediate_states_out(f16_env, monkeypatch):
    torch, api, lib, d = f16_env
    x = _inputs(torch, B=2, T=3)
    pool, idx = torch.zeros(5, 4, 128, 128), torch.tensor([3, 1], dtype=torch.int32)
    inter = torch.full((2, 3, 4, 128, 128), math.nan)
    e = lambda match, *a, **kw: _expect(api, lib, d, match, *a, pool=True, poisoned=(inter,), **kw)  # noqa: E731
    e(r"intermediate_states_out shape: got \[2, 2, 4, 128, 128\]; allowed: \[2, 3, 4, 128, 128\]",
      *x.values(), pool, idx, intermediate_states_out=inter[:, :2].contiguous())
    e(r"intermediate_states_out dtype: got bfloat16", *x.values(), pool, idx, intermediate_states_out=inter.bfloat16())
    e(r"intermediate_states_out shape: got \[2, 3, 4, 128, 128\]; allowed: \[2, 3, 4, 128, 128\]|"
      r"intermediate_states_out shape", *x.values(), pool, idx, state_v_first=True,
      intermediate_states_out=inter[..., :64].contiguous())
    long = _inputs(torch, B=2, T=9)
    e(r"intermediate_states_out: got a call of up to 9 tokens per sequence; allowed: sequences of at most 8 tokens",
      *long.values(), pool, idx, intermediate_states_out=torch.zeros(2, 9, 4, 128, 128))
    _FakeCuda(monkeypatch, api, lib)
    api.fused_recurrent_kda_pool(*x.values(), pool, idx, intermediate_states_out=inter, library=lib)
    a = d.kda2_test_last().contents
    assert a.intermediate == inter.data_ptr() and a.h0 == a.ht == pool.data_ptr() and a.T == 3
    assert d.kda2_test_last_max_seqlen() == 3  # routed to the multi-token bucket (8)
    o, _ = api.fused_recurrent_kda(*x.values(), intermediate_states_out=inter, library=lib)
    assert d.kda2_test_last().contents.intermediate == inter.data_ptr()


def test_bf16_decode_states(f16_env, monkeypatch):
    """bf16 states (features.bf16_decode_state): h0, ht, the pool and per-token states in bf16 for calls that route to
    the decode buckets; the flag is set, ht is allocated in bf16; longer calls and mixed dtypes are refused."""
    torch, api, lib, d = f16_env
    x = _inputs(torch, B=2, T=3)
    bf = torch.bfloat16
    h0 = torch.zeros(2, 4, 128, 128, dtype=bf)
    pool, idx = torch.full((5, 4, 128, 128), math.nan, dtype=bf), torch.tensor([3, 1], dtype=torch.int32)
    e = lambda match, *a, **kw: _expect(api, lib, d, match, *a, **kw)  # noqa: E731
    e(r"final_state_out dtype: got float32; allowed: bfloat16", *x.values(), initial_state=h0, output_final_state=True,
      final_state_out=torch.zeros(2, 4, 128, 128))
    long = _inputs(torch, B=2, T=9)
    e(r"state_pool: got bfloat16 states with sequences of up to 9 tokens; allowed: bfloat16 states only up to 8",
      *long.values(), pool, idx, pool=True)
    e(r"intermediate_states_out dtype: got float32; allowed: bfloat16", *x.values(), pool, idx, pool=True,
      intermediate_states_out=torch.zeros(2, 3, 4, 128, 128))
    e(r"initial_state dtype: got float16; allowed: float32 or bfloat16", *x.values(),
      initial_state=h0.half())
    _FakeCuda(monkeypatch, api, lib)
    _, ht = api.fused_recurrent_kda(*x.values(), initial_state=h0, output_final_state=True, library=lib)
    a = d.kda2_test_last().contents
    assert ht.dtype == bf and a.flags & abi.FLAG_STATE_BF16 and a.h0 == h0.data_ptr() and a.ht == ht.data_ptr()
    api.fused_recurrent_kda_pool(*x.values(), pool, idx, library=lib)
    assert d.kda2_test_last().contents.flags & abi.FLAG_STATE_BF16
    api.fused_recurrent_kda(*x.values(), initial_state=h0.float(), output_final_state=True, library=lib)
    assert not d.kda2_test_last().contents.flags & abi.FLAG_STATE_BF16


def test_varlen_device_only_reads_nothing_back(f16_env):
    """Only a device cu_seqlens: N from its length, the longest sequence bounded by the token count (capped at the
    largest bucket of a recurrent library), and the tensor is never read (a meta tensor cannot be)."""
    torch, api, lib, d = f16_env
    from kda2.runtime import validate

    cu = torch.empty(4, dtype=torch.int64, device="meta")
    assert validate.check_varlen(lib, cu, None, None, 1, 40, cu.device) == (3, 40)
    assert validate.check_varlen(lib, cu, None, None, 1, 5000, cu.device) == (3, lib.max_bucket)
    assert validate.check_varlen(lib, cu, None, 7, 1, 5000, cu.device) == (3, 7)  # the promise, unchecked


def test_chunk_converts_bf16_gate_parameters(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    if CC is None:
        pytest.skip("no C compiler")
    from kda2.runtime import api, chunk
    lib = loader.load(make_fake_build(tmp_path / "build", spec="fake_chunk", family="chunk",
                                      buckets=(2048, 8192, 65536)))
    api._init_torch()
    d = _hooks(lib)
    _FakeCuda(monkeypatch, api, lib)
    x = _inputs(torch, B=2, T=100, H=2, HV=6)
    for dtype in (torch.bfloat16, torch.float16):
        A_log, dt_bias = torch.ones(6, dtype=dtype), torch.ones(6 * 128, dtype=dtype)
        chunk.chunk_kda(*x.values(), use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias, library=lib)
        a = d.kda2_test_last().contents
        assert a.A_log not in (None, A_log.data_ptr()) and a.dt_bias not in (None, dt_bias.data_ptr())
        assert not a.flags & (abi.FLAG_A_LOG_BF16 | abi.FLAG_DT_BIAS_BF16) and (a.H, a.HV) == (2, 6)
    # a chunk library built without fp16 names what is built and the spec field that adds it
    with pytest.raises(KDA2InputError, match="q dtype: got float16; allowed: bf16 .*add fp16 to features.input_dtypes"):
        chunk.chunk_kda(*_half(x, torch).values(), library=lib)
    chunk.release_workspaces()


def test_chunk_fp16_inputs_where_built(tmp_path, monkeypatch):
    """A chunk library built with fp16 takes fp16 q/k/v (and an fp16 g / beta) and allocates o in fp16; mixed
    16-bit dtypes are refused before any launch."""
    torch = pytest.importorskip("torch")
    if CC is None:
        pytest.skip("no C compiler")
    from kda2.runtime import api, chunk
    lib = loader.load(make_fake_build(tmp_path / "build", spec="fake_chunk16", family="chunk",
                                      features=dict(FEATURES, input_dtypes=["bf16", "fp16"]),
                                      buckets=(2048, 8192, 65536)))
    api._init_torch()
    d = _hooks(lib)
    _FakeCuda(monkeypatch, api, lib)
    x = _half(_inputs(torch, B=2, T=100, H=2, HV=4), torch)
    x16 = dict(x, g=x["g"].half(), beta=x["beta"].half())
    o, _ = chunk.chunk_kda(*x16.values(), library=lib)
    a = d.kda2_test_last().contents
    assert o.dtype == torch.float16 and a.flags & abi.FLAG_INPUT_FP16
    assert a.flags & abi.FLAG_G_BF16 and a.flags & abi.FLAG_BETA_BF16  # 16-bit, in the input dtype
    calls = d.kda2_test_calls()
    for bad, what in ((dict(x, k=x["k"].bfloat16()), r"\bk dtype"), (dict(x, g=x["g"].bfloat16()), r"\bg dtype"),
                      (dict(x, beta=x["beta"].bfloat16()), r"beta dtype")):
        with pytest.raises(KDA2InputError, match=what):
            chunk.chunk_kda(*bad.values(), library=lib)
    with pytest.raises(KDA2InputError, match=r"out dtype"):
        chunk.chunk_kda(*x.values(), library=lib, out=torch.empty(x["v"].shape, dtype=torch.bfloat16))
    assert d.kda2_test_calls() == calls
    chunk.release_workspaces()


@needs_cc
def test_default_library_by_head_dims(tmp_path, monkeypatch):
    build = tmp_path / "build"
    make_fake_build(build, spec="h64", k=64, v=64)
    make_fake_build(build, spec="h128")
    monkeypatch.setattr(loader, "current_capability", lambda *a: (9, 0))
    monkeypatch.setenv("KDA2_BUILD_DIR", str(build))
    assert loader.default_library("recurrent", 64, 64).spec == "h64"
    assert loader.default_library("recurrent", 128, 128).spec == "h128"
    assert loader._default is None  # several: no single default for the hot path
    with pytest.raises(ArtifactError, match=r"no recurrent library fits this GPU and head dims K=256, V=256.*"
                                            r"h128.*K, V = \(128, 128\).*h64.*K, V = \(64, 64\)"):
        loader.default_library("recurrent", 256, 256)
    with pytest.raises(ArtifactError, match="more than one recurrent library"):
        loader.default_library("recurrent")
    assert loader.built_head_dims("recurrent") == "K=64 V=64 (h64: sm_90a), K=128 V=128 (h128: sm_90a)"
    make_fake_build(build, spec="h64", arch="sm_80", k=64, v=64)   # which arch builds a dim: an A100 needs sm_80
    assert loader.built_head_dims("recurrent") == "K=64 V=64 (h64: sm_80, sm_90a), K=128 V=128 (h128: sm_90a)"


@needs_cc
def test_chunk_kda_default_library_follows_the_head_dims(tmp_path, monkeypatch):
    """With several chunk libraries built side by side (the default specs build K = 64, 128 and 256), chunk_kda
    without library= takes the one built for the call's K and V, as fused_recurrent_kda does."""
    torch = pytest.importorskip("torch")
    from kda2.runtime import api, chunk
    build = tmp_path / "build"
    for dims in (64, 128):
        make_fake_build(build, spec=f"c{dims}", family="chunk", k=dims, v=dims, buckets=(2048, 8192, 65536))
    monkeypatch.setattr(loader, "current_capability", lambda *a: (9, 0))
    monkeypatch.setenv("KDA2_BUILD_DIR", str(build))
    monkeypatch.setattr(loader, "_defaults", {})
    api._init_torch()
    for dims in (64, 128):
        lib = loader.default_library("chunk", dims, dims)
        assert lib.spec == f"c{dims}"
        _FakeCuda(monkeypatch, api, lib)
        x = _inputs(torch, B=1, T=100, H=2, HV=2, K=dims, V=dims)
        o, _ = chunk.chunk_kda(*x.values())
        a = _hooks(lib).kda2_test_last().contents
        assert o.shape == x["v"].shape and (a.N, a.T, a.H) == (1, 100, 2)
    chunk.release_workspaces()


def test_fp32_copies_of_gate_parameters_are_made_once_per_version():
    """A model's fp16 parameter is cast once, not on every call (decode calls it every step), and cast again after
    an in-place update (a weight reload); fp32 tensors are passed as they are."""
    torch = pytest.importorskip("torch")
    from kda2.runtime.params import fp32_copy

    p = torch.nn.Parameter(torch.ones(4, dtype=torch.float16), requires_grad=False)
    a = fp32_copy(p)
    assert a.dtype == torch.float32 and fp32_copy(p) is a
    with torch.no_grad():
        p.copy_(torch.full((4,), 2.0))
    b = fp32_copy(p)
    assert b is not a and b.tolist() == [2.0] * 4 and fp32_copy(p) is b
    x = torch.ones(3)
    assert fp32_copy(x) is x


def test_strided_gate_parameters_are_taken_in_every_dtype_alike():
    """A strided view of A_log / dt_bias is copied to a contiguous fp32 tensor in each of the three dtypes taken (a
    strided fp16 one was taken and a strided fp32 one refused as non-contiguous); contiguous parameters the family's
    kernels read pass as they are, and what is not a gate-parameter dtype passes on for the checks to name."""
    torch = pytest.importorskip("torch")
    from kda2.runtime.params import gate_params

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        base = torch.arange(8, dtype=dtype)
        view = base[::2]
        assert not view.is_contiguous()
        for family in ("chunk", "recurrent"):
            a, d = gate_params(view, base, family)
            assert a.dtype == torch.float32 and a.is_contiguous() and a.tolist() == [0.0, 2.0, 4.0, 6.0]
            assert (d is base) == (dtype is torch.float32 or (family == "recurrent" and dtype is torch.bfloat16))
    wrong = torch.arange(4, dtype=torch.float64)
    assert gate_params(wrong, None, "chunk") == (wrong, None)
