"""Argument checks of the torch API (kda2.runtime.api): every rule a call must pass before a launch.

Each failure is a `KDA2InputError` naming the argument, what it was and what is allowed (and, for a
feature the library lacks, the closest built option or the spec field to change). Nothing here
allocates or launches, so a failed call leaves every output and state untouched. The device check
comes last (`device_index`), so every other rule is reachable with CPU tensors in tests.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

from kda2.runtime import abi, loader
from kda2.runtime.errors import ArtifactError, KDA2InputError
from kda2.runtime.library import Library
from kda2.runtime.params import TAKEN as TAKEN_PARAM_DTYPES

_torch: Any = None
_BF16 = _F16 = _F32 = _I32 = _I64 = None
#: dtype name of features.input_dtypes -> torch dtype (bound by init_torch).
_INPUT_DTYPES: dict[str, Any] = {}


def init_torch() -> Any:
    """Import torch (on first use only: the runtime imports without it) and bind the dtypes checked."""
    global _torch, _BF16, _F16, _F32, _I32, _I64
    if _torch is None:
        try:
            import torch
        except ImportError as exc:
            raise ImportError("kda2.runtime.fused_recurrent_kda needs torch; without it, drive the library "
                              "through Library.launch_raw with raw device pointers") from exc
        _BF16, _F16, _F32, _I32, _I64 = torch.bfloat16, torch.float16, torch.float32, torch.int32, torch.int64
        _INPUT_DTYPES.update(bf16=torch.bfloat16, fp16=torch.float16)
        _torch = torch
    return _torch


_GATE_NAMES = abi.GATE_MODE_NAMES
_HOW_GATE = {
    "precomputed": "use_gate_in_kernel=False (g is the log decay)",
    "softplus": "use_gate_in_kernel=True, lower_bound=None",
    "lower_bound": "use_gate_in_kernel=True, lower_bound=<negative float>",
}


def fail(name: str, given: Any, allowed: str) -> KDA2InputError:
    return KDA2InputError(f"{name}: got {given}; allowed: {allowed}")


def real(name: str, x: Any, allowed: str) -> float:
    """A Python / numpy / 0-d tensor number as float; anything else (a string, a bool, a tensor of several
    elements) is refused naming the argument, not left to float()'s own message."""
    if isinstance(x, (bool, str, bytes)):
        raise fail(name, repr(x), allowed)
    try:
        return float(x)
    except (TypeError, ValueError, RuntimeError):
        raise fail(name, f"{type_name(x)} {x!r}"[:80], allowed) from None


def whole(name: str, x: Any, allowed: str) -> int:
    """An integral number (int, numpy integer, 0-d integer tensor) as int; bools and floats are refused."""
    if isinstance(x, bool) or not hasattr(x, "__index__"):
        raise fail(name, repr(x) if isinstance(x, (bool, str, float)) else type_name(x), allowed)
    return x.__index__()


def type_name(x: Any) -> str:
    """`numpy.ndarray`, `list`, `None`: what a non-tensor argument is, by its qualified type name."""
    if x is None:
        return "None"
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def not_tensor(name: str, x: Any) -> KDA2InputError:
    """`name` is not a torch.Tensor. The torch API takes torch tensors only (raw device pointers go through
    Library.launch_raw); array types that torch can wrap get the conversion named."""
    how = ""
    if type(x).__module__.split(".")[0] == "numpy":
        how = " (convert a numpy array with torch.from_numpy(x).cuda())"
    elif hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__"):
        how = " (wrap a DLPack / __cuda_array_interface__ array without a copy: torch.from_dlpack(x))"
    return fail(name, type_name(x), f"a torch.Tensor on a CUDA device{how}")


def _dt(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _spec(lib: Library) -> str:
    return f"spec {lib.spec} ({lib.arch})"


def check_tensor(name: str, t: Any, dtypes: tuple, shape: tuple, dev: Any, allowed: str | None = None) -> None:
    """dtype, device, shape and contiguity of one tensor argument (`allowed`: the dtypes a refusal names, where
    the caller converts more than `dtypes` before it gets here).

    One boolean expression on the success path (this runs ~8 times per call); the slow path below
    works out which property failed only when something did.
    """
    try:
        if t.dtype in dtypes and t.device == dev and t.shape == shape and t.is_contiguous():
            return
    except AttributeError:
        pass
    if not isinstance(t, _torch.Tensor):
        raise not_tensor(name, t)
    if t.dtype not in dtypes:
        raise fail(f"{name} dtype", _dt(t.dtype), allowed or " or ".join(_dt(d) for d in dtypes))
    if t.device != dev:
        raise fail(f"{name} device", t.device, f"the device of q ({dev}); all tensors must be on one CUDA device")
    if t.shape != shape:
        raise fail(f"{name} shape", list(t.shape), str(list(shape)))
    raise fail(name, f"a non-contiguous tensor (strides {t.stride()})", "a contiguous tensor (call .contiguous())")


def check_inputs(q, k, v, g, beta, out, lib: Library | None = None):
    """q, k, v, g, beta and out: types, ranks, shapes, dtypes, one device, contiguity; with `lib` also its head
    dims and input dtypes. Returns (device of q, B, T, H, K, HV, V, input dtype).

    The first part of `prepare`; with lib=None it needs no library and no GPU, so a call whose default library
    cannot be found (`explain_lookup`) still reports a wrong argument rather than the failed lookup.
    """
    # Device is checked last (only "same device as q" here), so every other check is testable on CPU.
    if not isinstance(q, _torch.Tensor):
        raise not_tensor("q", q)
    if q.ndim != 4:
        raise fail("q shape", list(q.shape), "a tensor [B, T, H, K]")
    dev = q.device
    B, T, H, K = q.shape
    if not isinstance(v, _torch.Tensor):
        raise not_tensor("v", v)
    if v.ndim != 4:
        raise fail("v shape", list(v.shape), "a tensor [B, T, HV, V]")
    HV, V = v.shape[2], v.shape[3]
    if lib is not None and (K != lib.k or V != lib.v):
        raise KDA2InputError(f"unsupported head dims K={K}, V={V}: {_spec(lib)} is built for K={lib.k}, V={lib.v}; "
                             f"built {lib.family} head dims: {loader.built_head_dims(lib.family)}; pass library= a "
                             f"build with those dims, or build a spec with head_dims {{k: {K}, v: {V}}}")
    if H <= 0 or HV < H or HV % H:
        raise fail("v heads", f"HV={HV} with H={H}", "HV >= H >= 1 with HV % H == 0 (GVA: value head hv reads "
                   "q/k head hv // (HV // H); any integer ratio runs)")
    # Input dtype: q, k, v (and o) share one of the spec's input_dtypes; fp32 inputs are refused by name.
    qd = q.dtype
    names = lib.features.input_dtypes if lib is not None else tuple(_INPUT_DTYPES)
    elem = next((t for t in (_INPUT_DTYPES.get(d) for d in names) if t is qd), None)
    if elem is None:
        built = " or ".join(names)
        hint = ("; cast q/k/v to bf16 or fp16 (the kernels accumulate in fp32)" if qd is _F32 else
                f"; add {_dt(qd).replace('float16', 'fp16')} to features.input_dtypes" if qd is _F16 else "")
        where = f"input dtypes built into {_spec(lib)}" if lib is not None else "the input dtypes kda2 builds"
        raise fail("q dtype", _dt(qd), f"{built} ({where}){hint}")
    check_tensor("q", q, (elem,), (B, T, H, K), dev)
    check_tensor("k", k, (elem,), (B, T, H, K), dev)
    check_tensor("v", v, (elem,), (B, T, HV, V), dev)
    check_tensor("g", g, (_F32, elem), (B, T, HV, K), dev)
    if isinstance(beta, _torch.Tensor) and beta.ndim == 4:
        raise fail("beta shape", list(beta.shape), f"[B, T, HV] = {[B, T, HV]} (per-channel beta is not supported)")
    check_tensor("beta", beta, (_F32, elem), (B, T, HV), dev)
    if out is not None:
        check_tensor("out", out, (elem,), (B, T, HV, V), dev)
    return dev, B, T, H, K, HV, V, elem


def explain_lookup(q, k, v, g, beta, out=None, required=(), optional=()) -> None:
    """Called while the lookup of a call's default library fails (no build, no GPU visible): raise the
    KDA2InputError of an argument that is wrong whatever the library (`check_inputs` without one; `required`
    and `optional` are (name, value) pairs that must be tensors, or tensors or None), in place of the lookup's
    error, so the user sees the mistake in the call first. Returns when the arguments look right; the caller
    then re-raises the lookup's error. Costs nothing on calls whose lookup succeeds."""
    try:
        check_inputs(q, k, v, g, beta, out)
        for name, t in required:
            if not isinstance(t, _torch.Tensor):
                raise not_tensor(name, t)
        for name, t in optional:
            if t is not None and not isinstance(t, _torch.Tensor):
                raise not_tensor(name, t)
    except KDA2InputError as exc:
        raise exc from None  # the lookup's failure is not what the user has to fix first


def looked_up(find, q, k, v, g, beta, out=None, required=(), optional=()) -> Library:
    """`find()`, a call's library lookup; where it fails (no build, no GPU visible) a wrong argument is reported
    first (`explain_lookup`), else the lookup's own error."""
    try:
        return find()
    except ArtifactError:
        explain_lookup(q, k, v, g, beta, out, required, optional)
        raise


def prepare(lib: Library, q, k, v, g, beta, A_log, dt_bias, scale, use_qk_l2norm_in_kernel,
             use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first,
             cu_seqlens, cu_seqlens_cpu, max_seqlen, out, family: str = "recurrent"):
    """Validate everything but the states; return the launch scalars (nothing allocated yet).

    `family`: the kernel family the calling API drives (fused_recurrent_kda: recurrent, chunk_kda: chunk).
    """
    check_family(lib, family)
    f = lib.features
    dev, B, T, H, K, HV, V, elem = check_inputs(q, k, v, g, beta, out, lib)

    flags = abi.FLAG_INPUT_FP16 if elem is _F16 else 0
    if g.dtype is elem:
        flags |= abi.FLAG_G_BF16  # 16-bit, in the input dtype
    if beta.dtype is elem:
        flags |= abi.FLAG_BETA_BF16
    if use_qk_l2norm_in_kernel:
        if not f.qk_l2norm:
            raise KDA2InputError(f"use_qk_l2norm_in_kernel=True: qk_l2norm is not compiled into {_spec(lib)}; "
                                 "normalise q and k before the call, or build with features.qk_l2norm: true")
        flags |= abi.FLAG_QK_L2NORM
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise KDA2InputError("allow_neg_eigval=True requires use_beta_sigmoid_in_kernel=True (as in FLA)")
    if use_beta_sigmoid_in_kernel:
        if not f.beta_sigmoid:
            raise KDA2InputError(f"use_beta_sigmoid_in_kernel=True: beta_sigmoid is not compiled into {_spec(lib)}; "
                                 "pass sigmoid(beta) instead, or build with features.beta_sigmoid: true")
        flags |= abi.FLAG_BETA_SIGMOID | (abi.FLAG_NEG_EIGVAL if allow_neg_eigval else 0)

    # Gate mode: chosen exactly as FLA does (by use_gate_in_kernel, then by lower_bound is None).
    lb = 0.0
    a_ptr = d_ptr = 0
    if not use_gate_in_kernel:
        mode = abi.GATE_PRECOMPUTED  # FLA ignores A_log / dt_bias / lower_bound here; so do we
    else:
        if lower_bound is None:
            mode = abi.GATE_SOFTPLUS
            if A_log is None:
                raise fail("A_log", None, f"a {TAKEN_PARAM_DTYPES} tensor [HV]={[HV]}: the softplus gate "
                            "(use_gate_in_kernel=True, lower_bound=None) needs A_log")
        else:
            mode = abi.GATE_LOWER_BOUND
            lb_allowed = "a finite negative float such as -5.0 (gates must be <= 0)"
            lb = real("lower_bound", lower_bound, lb_allowed)
            if not (lb < 0.0 and math.isfinite(lb)):
                raise fail("lower_bound", lower_bound, lb_allowed)
        # Gate parameters: fp32 or bf16 (recurrent) / fp32 (chunk) here, read as fp32 by the kernels; the callers
        # convert the other float dtypes FLA takes first (kda2.runtime.params).
        params = (_F32, _BF16) if family == "recurrent" else (_F32,)
        if A_log is not None:
            check_tensor("A_log", A_log, params, (HV,), dev, TAKEN_PARAM_DTYPES)
            flags |= abi.FLAG_HAS_A_LOG | (abi.FLAG_A_LOG_BF16 if A_log.dtype is _BF16 else 0)
            a_ptr = A_log.data_ptr()
        if dt_bias is not None:
            two_d = isinstance(dt_bias, _torch.Tensor) and dt_bias.ndim == 2  # [HV, K] is the same memory
            check_tensor("dt_bias", dt_bias, params, (HV, K) if two_d else (HV * K,), dev, TAKEN_PARAM_DTYPES)
            flags |= abi.FLAG_HAS_DT_BIAS | (abi.FLAG_DT_BIAS_BF16 if dt_bias.dtype is _BF16 else 0)
            d_ptr = dt_bias.data_ptr()
    name = _GATE_NAMES[mode]
    if name not in f.gate_modes:
        compiled = "; ".join(f"{m} ({_HOW_GATE[m]})" for m in f.gate_modes)
        raise KDA2InputError(f"gate mode {name!r} ({_HOW_GATE[name]}) is not compiled into {_spec(lib)}; "
                             f"compiled: {compiled}; or add {name} to features.gate_modes")

    layout = "v_first" if state_v_first else "k_first"
    if layout not in f.state_layouts:
        other = f.state_layouts[0] if f.state_layouts else "none"
        raise KDA2InputError(f"state_v_first={bool(state_v_first)}: state layout {layout} is not built into "
                             f"{_spec(lib)} (built: {list(f.state_layouts)}); pass state_v_first="
                             f"{other == 'v_first'} or add {layout} to features.state_layouts")

    if cu_seqlens is None:
        if cu_seqlens_cpu is not None:
            raise KDA2InputError("cu_seqlens_cpu given without cu_seqlens; pass both (the device copy is what the kernel reads)")
        N, longest = B, T
    else:
        N, longest = check_varlen(lib, cu_seqlens, cu_seqlens_cpu, max_seqlen, B, T, dev)
    if longest > lib.max_bucket and lib.family == "recurrent":  # chunk kernels take any length
        raise KDA2InputError(f"T={longest} exceeds the largest seq_len bucket {lib.max_bucket} of {_spec(lib)}; "
                             "add a larger bucket to seq_len_buckets")
    if T > 0x7FFFFFFF or N > 0x7FFFFFFF:
        raise fail("token count", T, "at most 2**31-1 tokens")
    scale = K ** -0.5 if scale is None else real("scale", scale, "None (K ** -0.5) or a float")
    return dev, N, B, T, H, HV, K, V, mode, flags, scale, lb, a_ptr, d_ptr, longest


def state_dtypes(lib: Library) -> tuple:
    """Dtypes the library's states may have: fp32, and bf16 where the spec opted in (decode kernels only)."""
    return (_F32, _BF16) if lib.features.bf16_decode_state else (_F32,)


def state_flag(lib: Library, dtype: Any, longest: int, v_first: bool, name: str) -> int:
    """KDA2_STATE_BF16 for bf16 states (after check_tensor accepted the dtype), once the call is known to route to
    a decode kernel that has the bf16-state entries."""
    if dtype is not _BF16:
        return 0
    most = lib.max_t_with("bf16_state", v_first)
    if longest > most:
        raise fail(name, f"bfloat16 states with sequences of up to {longest} tokens",
                   f"bfloat16 states only up to {most} tokens per sequence (the decode buckets of {_spec(lib)}; "
                   "features.bf16_decode_state), float32 states for longer calls")
    return abi.FLAG_STATE_BF16


def device_index(lib: Library, dev: Any) -> int:
    """Last check of every call (so all others are reachable with CPU tensors in tests)."""
    require_cuda(dev)
    idx = dev.index
    if idx not in lib._checked_devices:
        with _torch.cuda.device(idx):  # preload targets the current context: make it this device's
            lib.check_device(idx, tuple(_torch.cuda.get_device_capability(idx)))
    return idx


def require_cuda(dev: Any) -> None:
    # A function of its own so the CPU tests can stub it and drive the whole path into a fake library.
    if dev.type != "cuda":
        raise fail("q device", dev, "a CUDA device (the kernels run on the GPU)")


def check_varlen(lib: Library, cu, cu_cpu, max_seqlen, B, T, dev):
    """Validate cu_seqlens; return (N, longest sequence or an upper bound of it). Never reads the device copy.

    With only the device `cu_seqlens`, N comes from its length and the longest sequence is bounded by the
    token count T (the kernels find each sequence's bounds on device): no synchronisation, graph-capturable,
    but the offsets are not checked (they must be non-decreasing from 0 to T). `cu_seqlens_cpu` (checked)
    or `max_seqlen` (a promise) are hints that pick a tighter bucket (recurrent) / a smaller grid (chunk).
    """
    if not lib.features.varlen:
        raise KDA2InputError(f"cu_seqlens given but varlen is not compiled into {_spec(lib)}; pad to dense "
                             "[B, T, ...] inputs, or build with features.varlen: true")
    if B != 1:
        raise fail("q shape", f"B={B} with cu_seqlens", "B == 1 (pack the sequences along T, FlashAttention style)")
    if not isinstance(cu, _torch.Tensor) or cu.dtype not in (_I64, _I32):
        raise fail("cu_seqlens dtype", _dt(getattr(cu, "dtype", type(cu).__name__)), "int64 (int32 is converted)")
    if cu.ndim != 1 or cu.numel() < 2:
        raise fail("cu_seqlens shape", list(cu.shape), "[N+1] with N >= 1")
    if cu.device != dev:
        raise fail("cu_seqlens device", cu.device, f"the device of q ({dev})")
    if not cu.is_contiguous():
        raise fail("cu_seqlens", "a non-contiguous tensor", "a contiguous tensor")
    N = cu.numel() - 1
    host = None
    if cu_cpu is not None:
        if isinstance(cu_cpu, _torch.Tensor) and cu_cpu.device.type != "cpu":
            raise fail("cu_seqlens_cpu device", cu_cpu.device, "cpu (a host copy; reading a device copy would sync)")
        host = cu_cpu.tolist() if isinstance(cu_cpu, _torch.Tensor) else list(cu_cpu)
        if len(host) != N + 1:
            raise fail("cu_seqlens_cpu length", len(host), f"{N + 1} (= len(cu_seqlens))")
    elif max_seqlen is None:
        if cu.device.type != "cpu":
            # No host copy and no promise: bound the longest sequence by the token count. Any length runs on
            # the last bucket of a recurrent library (its kernels loop to each sequence's own end).
            return N, min(T, lib.max_bucket) if lib.family == "recurrent" else T
        host = cu.tolist()  # a host tensor (CPU tests, where the device check is stubbed): free to read
    if host is not None:
        if host[0] != 0 or host[-1] != T or any(b < a for a, b in zip(host, host[1:])):
            raise fail("cu_seqlens_cpu values" if cu_cpu is not None else "cu_seqlens values",
                       host if len(host) <= 16 else f"{host[:8]}...{host[-4:]}",
                       f"non-decreasing offsets from 0 to the token count T={T}")
        longest = max(b - a for a, b in zip(host, host[1:]))
        if max_seqlen is not None and whole("max_seqlen", max_seqlen, "None or an int") < longest:
            raise fail("max_seqlen", max_seqlen, f">= the longest sequence ({longest})")
    else:
        longest = whole("max_seqlen", max_seqlen, "None or a non-negative int")  # the caller's promise: too small
        # would pick a variant for shorter inputs
        if longest < 0:
            raise fail("max_seqlen", max_seqlen, "a non-negative int")
    return N, longest


_API_OF = {"recurrent": "fused_recurrent_kda", "chunk": "chunk_kda"}


def library_arg(library: Library | None, family: str = "recurrent") -> Library:
    if library is not None:
        if not isinstance(library, Library):
            raise fail("library", type(library).__name__, "a kda2.runtime.Library (kda2.runtime.load(path))")
        return library
    if family == "recurrent":
        return loader._default or loader.default_library()
    return loader._defaults.get(family) or loader.default_library(family)


def default_for(family: str, q: Any, v: Any) -> Library:
    """The default library of `family` for the call's head dims (K from q, V from v; several libraries of
    one family, one per head-dim pair, may be built side by side)."""
    try:
        k_dim, v_dim = int(q.shape[-1]), int(v.shape[-1])
    except (AttributeError, IndexError, TypeError):
        return library_arg(None, family)  # not tensors: the checks that follow say what is wrong
    return loader.default_library(family, k_dim, v_dim)


def check_family(lib: Library, family: str) -> None:
    if lib.family != family:
        other = _API_OF.get(lib.family, "another API")
        raise KDA2InputError(f"library {_spec(lib)} is family {lib.family!r}; {_API_OF[family]} needs a {family} "
                             f"library (kda2.load(<a {family} build>)), or call {other} with this one")


def state_shape(N: int, HV: int, K: int, V: int, v_first: bool) -> tuple:
    return (N, HV, V, K) if v_first else (N, HV, K, V)


#: set once warn_forward_only has warned (once a process: a model's every layer and step would repeat it)
forward_only_warned = False


def warn_forward_only(api: str, *tensors: Any) -> None:
    """Called with autograd recording: where an input requires grad, say once that kda2 computes the forward
    only, so its outputs carry no autograd history and no gradient reaches the inputs (FLA's functions train)."""
    global forward_only_warned
    if any(getattr(t, "requires_grad", False) for t in tensors):
        forward_only_warned = True
        warnings.warn(f"kda2 {api} computes the forward only: its outputs carry no autograd history, so no "
                      "gradient reaches q/k/v/g/beta/A_log/dt_bias/initial_state; call it under torch.no_grad() or "
                      "torch.inference_mode() (this warning is then not given), or use FLA to train",
                      UserWarning, stacklevel=3)


def legacy_kwargs(kwargs: dict, state_v_first: bool, api: str = "fused_recurrent_kda", depth: int = 1) -> bool:
    """FLA's deprecated `transpose_state_layout` alias; any other unknown keyword is an error, not ignored."""
    if "transpose_state_layout" in kwargs:
        if state_v_first:
            raise KDA2InputError("pass either state_v_first or the deprecated transpose_state_layout, not both")
        # FLA's words, at the line that called the API (`depth`: the API's frames between it and this one)
        warnings.warn("`transpose_state_layout` is deprecated and renamed to `state_v_first`.", DeprecationWarning,
                      stacklevel=2 + depth)
        state_v_first = bool(kwargs.pop("transpose_state_layout"))
    if kwargs:
        raise TypeError(f"{api}() got unexpected keyword arguments {sorted(kwargs)}")
    return state_v_first


def chunk_kwargs(kwargs: dict, state_v_first: bool, return_intermediate_states: Any = False,
                 cp_context: Any = None, max_num_seqs: Any = None) -> bool:
    """chunk_kda's FLA parameters kda2 cannot honour or ignores (checked) and its keywords from `kwargs`
    (consumed); returns state_v_first. (disable_recompute, a knob of FLA's backward, and use_graph, FLA's CUDA graph
    of its own launches, need no check: a kda2 call is forward-only and can be captured as it is.)"""
    chunk_size = kwargs.pop("chunk_size", abi.CHUNK)
    if chunk_size != abi.CHUNK:
        if chunk_size == 32:
            raise KDA2InputError("chunk_size=32: the kda2 chunk kernels use 64-token chunks; pass chunk_size=64 "
                                 "(the same result up to rounding)")
        raise fail("chunk_size", chunk_size, "64 (FLA also allows 32; kda2 builds 64 only)")
    seqs_allowed = "None or an int >= 1 (FLA's graph sizing; kda2 ignores it)"
    if max_num_seqs is not None and whole("max_num_seqs", max_num_seqs, seqs_allowed) < 1:
        raise fail("max_num_seqs", repr(max_num_seqs), seqs_allowed)
    if return_intermediate_states:
        raise KDA2InputError("return_intermediate_states=True is not supported: the kda2 chunk kernels keep chunk "
                             "states on chip; use return_intermediate_states=False")
    if cp_context is not None:
        raise KDA2InputError("cp_context (context parallelism) is not supported by kda2; pass cp_context=None")
    return legacy_kwargs(kwargs, state_v_first, "chunk_kda", depth=2)


def check_safe_gate(safe_gate: bool, use_gate_in_kernel: bool, lower_bound: Any) -> None:
    """FLA's rule: safe_gate with the gate in the kernel needs lower_bound in [-5, 0). (The kda2 chunk
    kernels never need the bound: every exponent they take is <= 0, so safe_gate selects nothing else.)"""
    if safe_gate and use_gate_in_kernel:
        if lower_bound is None:
            raise fail("lower_bound", None, "a float in [-5, 0) with safe_gate=True and use_gate_in_kernel=True "
                       "(as in FLA); or safe_gate=False for the unbounded softplus gate")
        try:
            ok = -5.0 <= float(lower_bound) < 0.0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise fail("lower_bound", lower_bound, "a float in the safe range [-5, 0) with safe_gate=True (as in FLA)")
