"""kda2.integrations.fla without torch, FLA or a GPU: the module is imported against a stand-in `fla.backends`
(a small copy of FLA 0.6's registry semantics: BaseBackend.is_enabled / verify, register, the dispatch loop),
a stand-in `fla.ops.kda.chunk`, stand-in libraries (kda2.runtime.library.Features, read from the same fields
as a manifest's) and stand-in tensors (objects with .shape/.dtype/.device). kda2's own torch entry points are
replaced by recorders, so what is checked is the backend itself: registration, the FLA_KDA2 opt-in, priority
against FlashKDA, verifier verdicts and their reasons, argument mapping (FLA's positional order, deprecated
keywords), availability without a library, and install()'s idempotence. The real thing runs on the GPU host
in tests/gpu/test_fla_backend_gpu.py.
"""
from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import sys
import types
import warnings
from functools import wraps
from inspect import unwrap
from types import SimpleNamespace

import pytest

from kda2.runtime.library import Features

# FLA 0.6's parameter lists (fla/ops/kda/chunk.py chunk_kda, fla/ops/kda/fused_recurrent.py
# fused_recurrent_kda_fwd): the backend methods must take the same arguments in the same order.
FLA_CHUNK_KDA = ["q", "k", "v", "g", "beta", "scale", "initial_state", "output_final_state",
                 "use_qk_l2norm_in_kernel", "use_gate_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval",
                 "safe_gate", "lower_bound", "disable_recompute", "return_intermediate_states", "state_v_first",
                 "cu_seqlens", "cu_seqlens_cpu", "cp_context", "use_graph", "max_num_seqs", "kwargs"]
FLA_FUSED_RECURRENT_KDA_FWD = ["q", "k", "v", "g", "beta", "A_log", "dt_bias", "initial_state", "scale",
                               "output_final_state", "inplace_final_state", "state_v_first", "cu_seqlens",
                               "ssm_state_indices", "num_accepted_tokens", "use_qk_l2norm_in_kernel",
                               "use_gate_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval", "lower_bound",
                               "out", "kwargs"]


# ---- a stand-in for FLA 0.6's fla.backends (semantics copied from fla/backends.py, no torch) ---------------
def _fla_stub(dispatch_disabled: bool = False) -> dict[str, types.ModuleType]:
    backends = types.ModuleType("fla.backends")
    backends._DISPATCH_DISABLED = dispatch_disabled
    backends.register_calls = []

    class BaseBackend:
        backend_type = "base"
        package_name = None
        env_var = None
        default_enable = True
        priority = 5
        implementation = None
        verifier = None

        def __init__(self, *, env_var=None):
            if env_var is not None:
                self.env_var = env_var

        def get_implementation(self, function_name):
            if self.implementation is not None:
                return self.implementation
            return getattr(self, function_name, None)

        @classmethod
        def is_available(cls):
            return cls.package_name is None

        def is_enabled(self):
            if self.env_var is None:
                return True
            if os.environ.get(f"FLA_{self.backend_type.upper()}", "0") != "0":
                return True
            return os.environ.get(self.env_var, "1" if self.default_enable else "0") != "0"

        def verify(self, function_name, *args, **kwargs):
            verifier = self.verifier or getattr(self, f"{function_name}_verifier", None)
            if verifier is None:
                return True, None
            try:
                return verifier(*args, **kwargs)
            except Exception as error:  # noqa: BLE001
                return False, str(error)

    class BackendRegistry:
        def __init__(self, operation_name):
            self.operation_name = operation_name
            self._backends = {}
            self.log = []  # what FLA would log: (function, backend_type, reason or None)

        def register(self, backend):
            self._backends[backend.backend_type] = backend

        def _get_sorted_backends(self):
            return sorted(self._backends.values(), key=lambda b: b.priority)

        def dispatch(self, default_function):
            if backends._DISPATCH_DISABLED:
                return default_function
            name = default_function.__name__

            @wraps(default_function)
            def wrapper(*args, **kwargs):
                for backend in self._get_sorted_backends():
                    if not (backend.is_available() and backend.is_enabled()):
                        continue
                    ok, reason = backend.verify(name, *args, **kwargs)
                    if not ok:
                        self.log.append((name, backend.backend_type, reason))
                        continue
                    impl = backend.get_implementation(name)
                    if impl is None:
                        continue
                    self.log.append((name, backend.backend_type, None))
                    return impl(*args, **kwargs)
                return default_function(*args, **kwargs)
            return wrapper

    backends._operation_registries = {}
    backends._function_registries = {}

    def _get_operation_registry(operation):
        return backends._operation_registries.setdefault(operation, BackendRegistry(operation))

    def register(entry_point, *, backend=None, verifier=None, env_var=None):
        def decorator(implementation):
            backends.register_calls.append((entry_point, implementation))
            if backends._DISPATCH_DISABLED and not isinstance(entry_point, str):
                return implementation
            if isinstance(implementation, type):
                registered = implementation()
            else:
                registered = backend() if backend is not None else BaseBackend()
                registered.implementation = implementation
            registered.verifier = verifier
            if env_var is not None:
                registered.env_var = env_var
            if isinstance(entry_point, str):
                registry = _get_operation_registry(entry_point)
            else:
                registry = backends._function_registries[unwrap(entry_point)]
            registry.register(registered)
            return implementation
        return decorator

    def dispatch(entry_point):
        if isinstance(entry_point, str):
            return _get_operation_registry(entry_point).dispatch
        if backends._DISPATCH_DISABLED:
            return entry_point
        registry = BackendRegistry(entry_point.__module__)
        backends._function_registries[unwrap(entry_point)] = registry
        return registry.dispatch(entry_point)

    backends.BaseBackend, backends.BackendRegistry = BaseBackend, BackendRegistry
    backends.register, backends.dispatch = register, dispatch

    chunk = types.ModuleType("fla.ops.kda.chunk")

    def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                  allow_neg_eigval=False, safe_gate=False, lower_bound=None, disable_recompute=False,
                  return_intermediate_states=False, state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                  cp_context=None, use_graph=False, max_num_seqs=None, **kwargs):
        return "fla", None

    chunk_kda.__module__ = "fla.ops.kda.chunk"
    chunk.chunk_kda = dispatch(chunk_kda)

    def fused_recurrent_kda_fwd(q, k, v, g, beta, A_log=None, dt_bias=None, initial_state=None, scale=None,
                                output_final_state=False, inplace_final_state=True, state_v_first=False,
                                cu_seqlens=None, ssm_state_indices=None, num_accepted_tokens=None,
                                use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                                use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None, out=None,
                                **kwargs):
        return "fla", None

    chunk.fused_recurrent_kda_fwd = dispatch("kda")(fused_recurrent_kda_fwd)  # lives in fused_recurrent.py in FLA

    fla, ops, kda = (types.ModuleType(n) for n in ("fla", "fla.ops", "fla.ops.kda"))
    fla.backends, fla.ops, ops.kda, kda.chunk = backends, ops, kda, chunk
    return {"fla": fla, "fla.backends": backends, "fla.ops": ops, "fla.ops.kda": kda, "fla.ops.kda.chunk": chunk}


# ---- stand-in tensors and libraries ---------------------------------------------------------------------
class Dev:
    def __init__(self, type="cuda", index=0):
        self.type, self.index = type, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class T:
    """Just enough of a tensor: shape, dtype (its str, as torch prints it), device, contiguity."""

    def __init__(self, *shape, dtype="torch.bfloat16", device=None, values=None, contiguous=True):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device or Dev()
        self.ndim, self._values, self._contiguous = len(shape), values, contiguous

    def is_contiguous(self):
        return self._contiguous

    def contiguous(self):
        return self if self._contiguous else T(*self.shape, dtype=self.dtype, device=self.device)

    def tolist(self):
        return list(self._values)


F32 = "torch.float32"


def lib(spec, family, k=128, v=128, ratios=(1, 2), gates=("precomputed", "softplus", "lower_bound"),
        layouts=("k_first", "v_first"), varlen=True, l2=True, bsig=True, buckets=(1, 64, 1024), arch="sm_90a",
        dtypes=("bf16", "fp16")):
    f = Features(gate_modes=tuple(gates), qk_l2norm=l2, beta_sigmoid=bsig, gva_ratios=tuple(ratios), varlen=varlen,
                 state_dtype="fp32", state_layouts=tuple(layouts), input_dtypes=tuple(dtypes))
    return SimpleNamespace(spec=spec, family=family, arch=arch, k=k, v=v, features=f, max_bucket=max(buckets))


# Stand-ins: the built Kimi specs (kernel_specs/*.yaml: input dtypes bf16 and fp16; chunk K=V=128 ratios 1,2;
# recurrent K=V=128 ratios 1,2,4 buckets to 1024) and a user's narrower K=V=64 serving shard (softplus/lower_bound gates, v_first, buckets to 256).
CHUNK = lib("kimi_linear_chunk", "chunk", buckets=(2048, 8192, 65536))
RECURRENT = lib("kimi_linear_recurrent", "recurrent", ratios=(1, 2, 4))
SMALL = lib("small_head_serving", "recurrent", k=64, v=64, ratios=(1, 2, 4), gates=("softplus", "lower_bound"),
            layouts=("v_first",), buckets=(1, 256))


def kda_inputs(B=1, T_=100, H=4, HV=4, K=128, V=128, dtype="torch.bfloat16", device=None, g_dtype="torch.bfloat16"):
    d = device or Dev()
    return dict(q=T(B, T_, H, K, dtype=dtype, device=d), k=T(B, T_, H, K, dtype=dtype, device=d),
                v=T(B, T_, HV, V, dtype=dtype, device=d), g=T(B, T_, HV, K, dtype=g_dtype, device=d),
                beta=T(B, T_, HV, dtype="torch.bfloat16", device=d))


def layer_chunk_call(**over):
    """What fla.layers.kda.KimiDeltaAttention passes to chunk_kda (prefill)."""
    x = kda_inputs(**{k: over.pop(k) for k in list(over) if k in ("B", "T_", "H", "HV", "K", "V", "dtype")})
    HV, K = x["v"].shape[2], x["q"].shape[3]
    call = dict(x, A_log=T(HV, dtype=F32), dt_bias=T(HV * K, dtype=F32), initial_state=None,
                output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                use_beta_sigmoid_in_kernel=True, allow_neg_eigval=False, safe_gate=False, lower_bound=None,
                state_v_first=True, cu_seqlens=None)
    call.update(over)
    return call


def layer_recurrent_call(**over):
    """What FLA's fused_recurrent_kda passes to fused_recurrent_kda_fwd for the layer's decode step."""
    x = kda_inputs(**{k: over.pop(k) for k in list(over) if k in ("B", "T_", "H", "HV", "K", "V", "dtype")})
    B, HV, K, V = x["q"].shape[0], x["v"].shape[2], x["q"].shape[3], x["v"].shape[3]
    call = dict(x, A_log=T(HV, dtype=F32), dt_bias=T(HV * K, dtype=F32),
                initial_state=T(B, HV, V, K, dtype=F32), scale=None, inplace_final_state=False,
                output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                use_beta_sigmoid_in_kernel=True, allow_neg_eigval=False, lower_bound=None, cu_seqlens=None,
                state_v_first=True)
    call.update(over)
    return call


# ---- fixtures ---------------------------------------------------------------------------------------------
@pytest.fixture
def setup(monkeypatch):
    """Import kda2.integrations.fla fresh against the stand-in FLA; returns a factory (dispatch_disabled=...)."""
    made = []

    def make(dispatch_disabled=False, libs=True):
        for name, mod in _fla_stub(dispatch_disabled).items():
            monkeypatch.setitem(sys.modules, name, mod)
        sys.modules.pop("kda2.integrations.fla", None)
        mod = importlib.import_module("kda2.integrations.fla")
        made.append(mod)
        calls = []
        monkeypatch.setattr(mod, "_capability", lambda index=None: (9, 0))  # an H100/H200
        monkeypatch.setattr(mod, "_grad_enabled", lambda: False)  # as under torch.inference_mode() (torch or not)
        monkeypatch.setattr(mod, "_capturing", lambda: False)
        def chunk(*a, **kw):
            calls.append(("chunk", a, kw))
            return "kda2", None

        def recurrent(*a, **kw):
            calls.append(("recurrent", a, kw))
            return "kda2", kw.get("final_state_out")

        monkeypatch.setattr(mod, "_kda2_chunk_kda", chunk)
        monkeypatch.setattr(mod, "_kda2_fused_recurrent_kda", recurrent)
        if libs:
            mod.install(chunk_library=CHUNK, recurrent_library=[RECURRENT, SMALL])
        return SimpleNamespace(mod=mod, fla=sys.modules["fla.backends"], ops=sys.modules["fla.ops.kda.chunk"],
                               calls=calls)

    monkeypatch.delenv("FLA_KDA2", raising=False)
    monkeypatch.delenv("FLA_FLASH_KDA", raising=False)
    monkeypatch.delenv("KDA2_LIBRARY", raising=False)
    yield make
    sys.modules.pop("kda2.integrations.fla", None)
    pkg = sys.modules.get("kda2.integrations")
    if pkg is not None and hasattr(pkg, "fla"):
        delattr(pkg, "fla")


@pytest.fixture
def env(setup):
    return setup()


def chunk_registry(env):
    return env.fla._function_registries[unwrap(env.ops.chunk_kda)]


def kda_registry(env):
    return env.fla._operation_registries["kda"]


# ---- registration and the switch --------------------------------------------------------------------------
def test_import_registers_one_kda2_backend_per_entry_point(env):
    chunk, rec = chunk_registry(env)._backends["kda2"], kda_registry(env)._backends["kda2"]
    assert type(chunk) is env.mod.KDA2ChunkBackend and type(rec) is env.mod.KDA2RecurrentBackend
    for b in (chunk, rec):
        assert (b.backend_type, b.env_var, b.default_enable) == ("kda2", "FLA_KDA2", False)
        assert b.priority < 3, "must be tried before FlashKDA (priority 3 in FLA 0.6)"
    assert env.mod.registered() == {"chunk_kda": chunk, "fused_recurrent_kda_fwd": rec}
    assert callable(rec.get_implementation("fused_recurrent_kda_fwd"))
    assert rec.get_implementation("chunk_kda_bwd") is None  # other "kda" operations are left to FLA


def test_install_is_idempotent(env):
    before = env.mod.registered()
    for _ in range(3):
        assert env.mod.install() .keys() == before.keys()
    assert list(chunk_registry(env)._backends) == ["kda2"] and list(kda_registry(env)._backends) == ["kda2"]
    assert env.mod.libraries("chunk") == (CHUNK,) and env.mod.libraries("recurrent") == (RECURRENT, SMALL), \
        "install() without arguments keeps the libraries pinned before"
    assert env.mod.registered()["chunk_kda"].priority == before["chunk_kda"].priority == 2


def test_opt_in_switch(env, monkeypatch):
    b = env.mod.registered()["chunk_kda"]
    assert not b.is_enabled(), "default_enable False: off unless FLA_KDA2 is set"
    assert env.ops.chunk_kda(**layer_chunk_call()) == ("fla", None) and env.calls == []
    monkeypatch.setenv("FLA_KDA2", "1")
    assert b.is_enabled()
    assert env.ops.chunk_kda(**layer_chunk_call()) == ("kda2", None) and [c[0] for c in env.calls] == ["chunk"]
    assert env.ops.fused_recurrent_kda_fwd(**layer_recurrent_call()) == ("kda2", None)
    assert chunk_registry(env).log[-1] == ("chunk_kda", "kda2", None)
    monkeypatch.setenv("FLA_KDA2", "0")
    assert not b.is_enabled() and env.ops.chunk_kda(**layer_chunk_call()) == ("fla", None)


def test_priority_ahead_of_flash_kda_and_fallback_to_it(env, monkeypatch):
    BaseBackend = env.fla.BaseBackend

    class FlashKDALike(BaseBackend):  # FLA 0.6's FlashKDABackend: priority 3, default on
        backend_type, env_var, default_enable, priority = "flash_kda", "FLA_FLASH_KDA", True, 3

        def chunk_kda(self, *a, **kw):
            return "flash_kda", None

    env.fla.register(env.ops.chunk_kda)(FlashKDALike)
    monkeypatch.setenv("FLA_KDA2", "1")
    assert env.ops.chunk_kda(**layer_chunk_call()) == ("kda2", None)
    # a call kda2 declines goes on to the next backend, then to FLA itself
    assert env.ops.chunk_kda(**layer_chunk_call(chunk_size=32)) == ("flash_kda", None)
    assert chunk_registry(env).log[-2] == ("chunk_kda", "kda2", "chunk_size=32: kda2 chunk kernels use 64-token chunks")


def test_dispatch_disabled_is_reported_not_raised(setup, caplog):
    with caplog.at_level(logging.WARNING, "kda2.integrations.fla"):
        env = setup(dispatch_disabled=True)
    assert "FLA_DISABLE_BACKEND_DISPATCH=1" in caplog.text
    assert env.mod.registered()["chunk_kda"] is None


# ---- availability -----------------------------------------------------------------------------------------
def test_no_library_means_not_available_with_a_log_line(setup, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("KDA2_BUILD_DIR", str(tmp_path))  # nothing built there
    env = setup(libs=False)
    with caplog.at_level(logging.INFO, "kda2.integrations.fla"):
        assert env.mod.KDA2ChunkBackend.is_available() is False
    assert "chunk_kda not available" in caplog.text and "no built chunk library" in caplog.text
    assert caplog.records[-1].levelno == logging.INFO, "not opted in: no warning"
    monkeypatch.setenv("FLA_KDA2", "1")
    with caplog.at_level(logging.INFO, "kda2.integrations.fla"):
        caplog.clear()
        assert env.mod.KDA2RecurrentBackend.is_available() is False
    assert caplog.records[-1].levelno == logging.WARNING and "fused_recurrent_kda_fwd not available" in caplog.text
    assert env.ops.chunk_kda(**layer_chunk_call()) == ("fla", None), "FLA keeps its kernel"
    s = env.mod.status()
    assert s["chunk_kda"]["available"] is False and "no built chunk library" in s["chunk_kda"]["reason"]
    assert s["chunk_kda"]["enabled"] is True


def test_no_gpu_means_not_available(setup, monkeypatch):
    env = setup(libs=False)

    def no_gpu(index=None):
        raise RuntimeError("torch.cuda.is_available() is False (no CUDA device)")

    monkeypatch.setattr(env.mod, "_capability", no_gpu)
    assert env.mod.KDA2ChunkBackend.is_available() is False
    assert "no CUDA device" in env.mod.status()["chunk_kda"]["reason"]


def test_rediscover_forgets_pinned_libraries(env, tmp_path, monkeypatch):
    assert env.mod.KDA2ChunkBackend.is_available()
    monkeypatch.setenv("KDA2_BUILD_DIR", str(tmp_path))
    env.mod.install(rediscover=True)
    assert env.mod.KDA2ChunkBackend.is_available() is False
    env.mod.install(chunk_library=CHUNK)
    assert env.mod.KDA2ChunkBackend.is_available()
    with pytest.raises(ValueError, match="is a recurrent library"):
        env.mod.install(chunk_library=RECURRENT)


# ---- verifier verdicts ------------------------------------------------------------------------------------
def chunk_verdict(env, **over):
    return env.mod.registered()["chunk_kda"].verify("chunk_kda", **layer_chunk_call(**over))


def rec_verdict(env, **over):
    return env.mod.registered()["fused_recurrent_kda_fwd"].verify("fused_recurrent_kda_fwd",
                                                                  **layer_recurrent_call(**over))


def test_layer_calls_are_accepted(env):
    assert chunk_verdict(env) == (True, None)
    assert chunk_verdict(env, HV=8, state_v_first=False, use_gate_in_kernel=False) == (True, None)
    assert chunk_verdict(env, lower_bound=-5.0, safe_gate=True, A_log=None) == (True, None)
    assert rec_verdict(env) == (True, None)
    assert rec_verdict(env, HV=16) == (True, None)  # any GVA ratio runs (issue 13)
    assert rec_verdict(env, HV=32) == (True, None)
    assert chunk_verdict(env, HV=16) == (True, None)


@pytest.mark.parametrize("over, reason", [
    (dict(dtype="torch.float32"), "q is float32; kda2's kimi_linear_chunk takes bfloat16 or float16 q, k, v"),
    (dict(k=T(1, 100, 4, 128, dtype="torch.float16")), "k is float16 but q is bfloat16"),
    (dict(K=64, V=64), "head dims K=64, V=64: kimi_linear_chunk is built for K=128, V=128"),
    (dict(HV=6), "HV=6 is not a multiple of H=4"),
    (dict(chunk_size=32), "chunk_size=32"),
    (dict(return_intermediate_states=True), "return_intermediate_states=True is not supported"),
    (dict(cp_context=object()), "cp_context"),
    (dict(use_graph=True), "use_graph=True"),
    (dict(safe_gate=True), "safe_gate=True needs lower_bound in [-5, 0)"),
    (dict(allow_neg_eigval=True, use_beta_sigmoid_in_kernel=False), "allow_neg_eigval=True without"),
    (dict(A_log=None), "use_gate_in_kernel=True without A_log or lower_bound"),
    (dict(initial_state=T(1, 4, 128, 128, dtype="torch.bfloat16")), "initial_state is bfloat16"),
    (dict(cu_seqlens=T(3, dtype="torch.int64"), B=2), "cu_seqlens with batch size 2"),
    (dict(g=T(1, 100, 4, 128, dtype="torch.float16")), "g is float16"),
    (dict(beta=T(1, 100, 4, 128)), "per-channel beta"),
    (dict(q=T(1, 100, 4, 128, device=Dev("cpu", None))), "q is on cpu; kda2 runs on CUDA devices"),
    (dict(state_v_first=True, transpose_state_layout=True), "both state_v_first and the deprecated"),
])
def test_chunk_verifier_reasons(env, over, reason):
    ok, why = chunk_verdict(env, **over)
    assert not ok and reason in why, why


def test_features_come_from_the_library(env):
    env.mod.install(chunk_library=lib("no_extras", "chunk", gates=("softplus",), layouts=("k_first",), varlen=False,
                                      l2=False, bsig=False))
    for over, reason in [(dict(use_gate_in_kernel=False), "gate mode 'precomputed' is not compiled"),
                         (dict(lower_bound=-5.0), "gate mode 'lower_bound' is not compiled"),
                         (dict(), "qk_l2norm is not compiled"),
                         (dict(use_qk_l2norm_in_kernel=False), "beta_sigmoid is not compiled"),
                         (dict(use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False),
                          "layout v_first is not built"),
                         (dict(use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False, state_v_first=False,
                               cu_seqlens=T(2, dtype="torch.int64", values=[0, 100])), "varlen is not compiled")]:
        ok, why = chunk_verdict(env, **over)
        assert not ok and reason in why, (over, why)
    assert chunk_verdict(env, use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                         state_v_first=False) == (True, None)
    # the deprecated alias counts as the layout it names
    ok, why = chunk_verdict(env, use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                            state_v_first=False, transpose_state_layout=True)
    assert not ok and "layout v_first" in why


def test_recurrent_verifier_reasons(env, monkeypatch):
    for over, reason in [
        (dict(ssm_state_indices=T(1, dtype="torch.int32")), "kda2.fused_recurrent_kda_pool"),
        (dict(inplace_final_state=True, initial_state=None), "inplace_final_state=True without initial_state"),
        (dict(T_=2000), "longest sequence 2000 exceeds kimi_linear_recurrent's largest seq_len bucket 1024"),
        (dict(beta=T(1, 100, 4, 128)), "per-channel beta"),
        (dict(A_log=None), "softplus gate needs A_log"),
        (dict(out=T(1, 100, 4, 128, dtype=F32)), "out must be a contiguous bfloat16"),
        (dict(HV=6), "HV=6 is not a multiple of H=4"),
        (dict(K=64, V=64, state_v_first=False), "layout k_first is not built into small_head_serving"),
        (dict(K=64, V=64, use_gate_in_kernel=False), "gate mode 'precomputed' is not compiled into small_head"),
        (dict(K=96, V=96), "K=96, V=96"),
    ]:
        ok, why = rec_verdict(env, **over)
        assert not ok and reason in why, (over, why)
    # varlen: the longest sequence counts, not the packed total (read back only past the largest bucket)
    cu = T(3, dtype="torch.int64", values=[0, 1000, 2000])
    assert rec_verdict(env, T_=2000, cu_seqlens=cu, initial_state=T(2, 4, 128, 128, dtype=F32)) == (True, None)
    cu = T(3, dtype="torch.int64", values=[0, 1500, 2000])
    assert not rec_verdict(env, T_=2000, cu_seqlens=cu)[0]
    # under CUDA graph capture nothing may be read back: varlen is served within the largest bucket (kda2 reads
    # nothing back), declined past it; the chunk family never reads the lengths
    monkeypatch.setattr(env.mod, "_capturing", lambda: True)
    cu = T(3, dtype="torch.int64", values=[0, 40, 100])
    assert rec_verdict(env, cu_seqlens=cu, initial_state=T(2, 4, 128, 128, dtype=F32)) == (True, None)
    assert chunk_verdict(env, cu_seqlens=cu, initial_state=T(2, 4, 128, 128, dtype=F32)) == (True, None)
    cu = T(3, dtype="torch.int64", values=[0, 1000, 2000])
    ok, why = rec_verdict(env, T_=2000, cu_seqlens=cu, initial_state=T(2, 4, 128, 128, dtype=F32))
    assert not ok and "under CUDA graph capture with 2000 packed tokens, past the largest seq_len bucket" in why
    monkeypatch.setattr(env.mod, "_capturing", lambda: False)
    monkeypatch.setattr(env.mod, "_grad_enabled", lambda: True)
    ok, why = rec_verdict(env)
    assert not ok and "forward-only: torch.is_grad_enabled() is True" in why
    assert not chunk_verdict(env)[0]


def test_library_choice_by_head_dims_and_arch(env, monkeypatch):
    monkeypatch.setenv("FLA_KDA2", "1")
    env.ops.fused_recurrent_kda_fwd(**layer_recurrent_call(K=64, V=64))
    env.ops.fused_recurrent_kda_fwd(**layer_recurrent_call())
    assert [c[2]["library"] for c in env.calls] == [SMALL, RECURRENT]
    monkeypatch.setattr(env.mod, "_capability", lambda index=None: (8, 0))  # an A100: sm_90a cannot run there
    env.mod._arch_ok.clear()
    ok, why = chunk_verdict(env)
    assert not ok and "built for sm_90a, which cannot run on cuda:0 (compute capability 8.0)" in why


# ---- arguments ------------------------------------------------------------------------------------------
def test_signatures_match_fla(env):
    chunk = inspect.signature(env.mod.KDA2ChunkBackend.chunk_kda)
    rec = inspect.signature(env.mod.KDA2RecurrentBackend.fused_recurrent_kda_fwd)
    assert list(chunk.parameters)[1:] == FLA_CHUNK_KDA
    assert list(rec.parameters)[1:] == FLA_FUSED_RECURRENT_KDA_FWD
    for sig in (chunk, rec, inspect.signature(env.mod.KDA2ChunkBackend.chunk_kda_verifier),
                inspect.signature(env.mod.KDA2RecurrentBackend.fused_recurrent_kda_fwd_verifier)):
        assert all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.VAR_KEYWORD) for p in sig.parameters.values())


def test_positional_chunk_call_maps_by_name(env, monkeypatch):
    """FLA's positional order differs from kda2.chunk_kda's after lower_bound: the backend passes keywords."""
    monkeypatch.setenv("FLA_KDA2", "1")
    x = kda_inputs(HV=4)
    h0 = T(1, 4, 128, 128, dtype=F32)
    args = [x["q"], x["k"], x["v"], x["g"], x["beta"], 0.5, h0, True, True, True, True, False, False, None,
            True,   # disable_recompute (kda2.chunk_kda's 15th positional would be state_v_first)
            False,  # return_intermediate_states
            True]   # state_v_first
    assert env.ops.chunk_kda(*args, A_log=T(4, dtype=F32), dt_bias=T(512, dtype=F32)) == ("kda2", None)
    kind, a, kw = env.calls[-1]
    assert a == (x["q"], x["k"], x["v"], x["g"], x["beta"])
    assert kw["scale"] == 0.5 and kw["initial_state"] is h0 and kw["output_final_state"] is True
    assert kw["state_v_first"] is True and kw["cu_seqlens"] is None and kw["library"] is CHUNK
    assert "disable_recompute" not in kw and kw["A_log"].shape == (4,)


def test_gate_tensors_are_dropped_when_the_gate_is_precomputed(env, monkeypatch):
    monkeypatch.setenv("FLA_KDA2", "1")
    env.ops.chunk_kda(**layer_chunk_call(use_gate_in_kernel=False))
    assert env.calls[-1][2]["A_log"] is None and env.calls[-1][2]["dt_bias"] is None  # FLA ignores them too


def test_deprecated_transpose_state_layout_mirrors_fla(env, monkeypatch):
    monkeypatch.setenv("FLA_KDA2", "1")
    call = layer_chunk_call(state_v_first=False)
    with pytest.warns(DeprecationWarning, match="`transpose_state_layout` is deprecated and renamed to `state_v_fi"):
        assert env.ops.chunk_kda(**call, transpose_state_layout=True) == ("kda2", None)
    assert env.calls[-1][2]["state_v_first"] is True and "transpose_state_layout" not in env.calls[-1][2]
    # both given: kda2 declines, so FLA's own chunk_kda raises its ValueError (here the stand-in returns)
    assert env.ops.chunk_kda(**layer_chunk_call(), transpose_state_layout=True) == ("fla", None)
    # called directly (not through the dispatcher) the backend raises what FLA raises
    backend = env.mod.registered()["chunk_kda"]
    with pytest.raises(ValueError, match="both state_v_first and the deprecated"):
        backend.chunk_kda(**layer_chunk_call(), transpose_state_layout=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.ops.chunk_kda(**layer_chunk_call())  # no warning without the alias


def test_inplace_final_state_writes_into_initial_state(env, monkeypatch):
    monkeypatch.setenv("FLA_KDA2", "1")
    call = layer_recurrent_call(inplace_final_state=True, output_final_state=False)
    o, ht = env.ops.fused_recurrent_kda_fwd(**call)
    kw = env.calls[-1][2]
    assert ht is call["initial_state"] and kw["final_state_out"] is call["initial_state"]
    assert kw["output_final_state"] is True and kw["initial_state"] is call["initial_state"]
    ok, why = rec_verdict(env, inplace_final_state=True,
                          initial_state=T(1, 4, 128, 128, dtype=F32, contiguous=False))
    assert not ok and "non-contiguous initial_state" in why


def test_inputs_are_made_contiguous(env, monkeypatch):
    monkeypatch.setenv("FLA_KDA2", "1")
    q = T(1, 100, 4, 128, contiguous=False)
    env.ops.fused_recurrent_kda_fwd(**layer_recurrent_call(q=q))
    passed_q = env.calls[-1][1][0]
    assert passed_q is not q and passed_q.is_contiguous()


def test_direct_call_verifies(env):
    backend = env.mod.registered()["fused_recurrent_kda_fwd"]
    assert backend.fused_recurrent_kda_fwd(**layer_recurrent_call()) == ("kda2", None)
    from kda2.runtime.errors import KDA2InputError
    with pytest.raises(KDA2InputError, match="HV=6 is not a multiple of H=4"):
        backend.fused_recurrent_kda_fwd(**layer_recurrent_call(HV=6))


# ---- input dtypes: what the library was built with (features.input_dtypes) -----------------------------------
def fp16_call(make, **over):
    """An fp16 layer call: q, k, v, g and beta in float16 (FLA's layers keep g and beta in the input dtype)."""
    x = make(dtype="torch.float16", **over)
    B, T_, HV, K = x["q"].shape[0], x["q"].shape[1], x["v"].shape[2], x["q"].shape[3]
    x.update(g=T(B, T_, HV, K, dtype="torch.float16"), beta=T(B, T_, HV, dtype="torch.float16"))
    return x


def test_fp16_inputs_run_on_kda2_where_built(env, monkeypatch):
    """Every kernel_specs/ spec builds input_dtypes [bf16, fp16] and kda2's API takes fp16: so does the backend."""
    chunk, rec = env.mod.registered()["chunk_kda"], env.mod.registered()["fused_recurrent_kda_fwd"]
    assert chunk.verify("chunk_kda", **fp16_call(layer_chunk_call)) == (True, None)
    assert rec.verify("fused_recurrent_kda_fwd", **fp16_call(layer_recurrent_call)) == (True, None)
    assert rec.verify("fused_recurrent_kda_fwd", **fp16_call(layer_recurrent_call, K=64, V=64)) == (True, None)
    # g / beta in float32 with fp16 q, k, v (kda2 takes float32 or q's dtype)
    call = fp16_call(layer_chunk_call)
    call.update(g=T(1, 100, 4, 128, dtype=F32), beta=T(1, 100, 4, dtype=F32))
    assert chunk.verify("chunk_kda", **call) == (True, None)
    out = T(1, 100, 4, 128, dtype="torch.float16")
    assert rec.verify("fused_recurrent_kda_fwd", **fp16_call(layer_recurrent_call, out=out)) == (True, None)
    monkeypatch.setenv("FLA_KDA2", "1")
    assert env.ops.chunk_kda(**fp16_call(layer_chunk_call)) == ("kda2", None)
    assert env.ops.fused_recurrent_kda_fwd(**fp16_call(layer_recurrent_call)) == ("kda2", None)
    assert [(c[0], c[1][0].dtype) for c in env.calls] == [("chunk", "torch.float16"), ("recurrent", "torch.float16")]


@pytest.mark.parametrize("over, reason", [
    # a 16-bit g / beta must be in q's dtype (kda2: float32 or q's dtype)
    (dict(g=T(1, 100, 4, 128, dtype="torch.bfloat16")), "g is bfloat16; with float16 q, kda2 takes float32 or float16 g"),
    (dict(beta=T(1, 100, 4, dtype="torch.bfloat16")), "beta is bfloat16; with float16 q, kda2 takes float32 or float16"),
    (dict(v=T(1, 100, 4, 128, dtype="torch.bfloat16")), "v is bfloat16 but q is float16; kda2 takes q, k, v in one"),
    (dict(out=T(1, 100, 4, 128, dtype="torch.bfloat16")), "out must be a contiguous float16 tensor"),
])
def test_fp16_mismatches_are_declined(env, over, reason):
    call = fp16_call(layer_recurrent_call)
    call.update(over)
    ok, why = env.mod.registered()["fused_recurrent_kda_fwd"].verify("fused_recurrent_kda_fwd", **call)
    assert not ok and reason in why, why


def test_input_dtypes_come_from_the_library(env):
    env.mod.install(chunk_library=lib("bf16_only", "chunk", dtypes=("bf16",)))
    ok, why = env.mod.registered()["chunk_kda"].verify("chunk_kda", **fp16_call(layer_chunk_call))
    assert (ok, why) == (False, "q is float16; kda2's bf16_only takes bfloat16 q, k, v")
    assert chunk_verdict(env) == (True, None)
    env.mod.install(chunk_library=lib("fp16_only", "chunk", dtypes=("fp16",)))
    assert chunk_verdict(env) == (False, "q is bfloat16; kda2's fp16_only takes float16 q, k, v")
    assert env.mod.registered()["chunk_kda"].verify("chunk_kda", **fp16_call(layer_chunk_call)) == (True, None)
    # several libraries: each one's reason, the dtype named per spec
    ok, why = rec_verdict(env, dtype="torch.float32", g=T(1, 100, 4, 128, dtype=F32))
    assert not ok and why == ("q is float32; kda2's kimi_linear_recurrent takes bfloat16 or float16 q, k, v; "
                              "head dims K=128, V=128: small_head_serving is built for K=64, V=64"), why


# ---- counters and fallback warnings ------------------------------------------------------------------------------
def test_status_counts_served_and_rejected_calls_per_entry_point(env, monkeypatch, caplog):
    s = env.mod.status()
    assert (s["chunk_kda"]["served"], s["chunk_kda"]["rejected"]) == (0, {})
    env.ops.chunk_kda(**layer_chunk_call(chunk_size=32))  # FLA_KDA2 unset: FLA never asks kda2, nothing counted
    assert env.mod.status()["chunk_kda"]["rejected"] == {}
    monkeypatch.setenv("FLA_KDA2", "1")
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert env.ops.chunk_kda(**layer_chunk_call()) == ("kda2", None)
        for _ in range(2):
            assert env.ops.chunk_kda(**layer_chunk_call(chunk_size=32)) == ("fla", None)
        env.ops.chunk_kda(**layer_chunk_call(dtype="torch.float32"))
        for _ in range(4):
            env.ops.fused_recurrent_kda_fwd(**layer_recurrent_call())
        env.ops.fused_recurrent_kda_fwd(**layer_recurrent_call(ssm_state_indices=T(1, dtype="torch.int32")))
    s = env.mod.status()
    size32 = "chunk_size=32: kda2 chunk kernels use 64-token chunks"
    fp32 = "q is float32; kda2's kimi_linear_chunk takes bfloat16 or float16 q, k, v"
    assert s["chunk_kda"]["served"] == 3 and s["chunk_kda"]["rejected"] == {size32: 2, fp32: 1}
    rec = s["fused_recurrent_kda_fwd"]
    assert rec["served"] == 4 and list(rec["rejected"].values()) == [1]
    assert "kda2.fused_recurrent_kda_pool" in next(iter(rec["rejected"]))
    assert json.loads(json.dumps(s)) == s, "status() stays JSON-serialisable"
    # one WARNING per distinct reason (not per call), on the module's logger, naming the entry point and reason
    warned = [r for r in caplog.records if r.name == "kda2.integrations.fla" and r.levelno == logging.WARNING]
    assert len(warned) == 3, [r.getMessage() for r in warned]
    assert "chunk_kda" in warned[0].getMessage() and size32 in warned[0].getMessage()
    assert fp32 in warned[1].getMessage() and "fused_recurrent_kda_fwd" in warned[2].getMessage()
    # a direct call the backend declines is counted too (and raises)
    from kda2.runtime.errors import KDA2InputError
    with pytest.raises(KDA2InputError):
        env.mod.registered()["chunk_kda"].chunk_kda(**layer_chunk_call(chunk_size=32))
    assert env.mod.status()["chunk_kda"]["rejected"][size32] == 3
    assert env.mod.registered()["chunk_kda"].chunk_kda(**layer_chunk_call()) == ("kda2", None)
    assert env.mod.status()["chunk_kda"]["served"] == 4


def test_distinct_reasons_are_capped(env, monkeypatch, caplog):
    """Reasons carry shapes (e.g. sequence lengths): past a cap, new ones share one bucket and one warning."""
    monkeypatch.setattr(env.mod, "_MAX_REASONS", 2)
    monkeypatch.setenv("FLA_KDA2", "1")
    with caplog.at_level(logging.WARNING, "kda2.integrations.fla"):
        for n in (2000, 3000, 4000, 5000, 4000, 2000):
            env.ops.fused_recurrent_kda_fwd(**layer_recurrent_call(T_=n))
    rejected = env.mod.status()["fused_recurrent_kda_fwd"]["rejected"]
    assert len(rejected) == 3 and sum(rejected.values()) == 6
    assert rejected[env.mod._OVERFLOW] == 3
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 3
