"""FLA-compatible torch API: `fused_recurrent_kda` (FLA 0.6 signature) and the serving form
`fused_recurrent_kda_pool` (vLLM-style state pool updated in place).

Every argument is validated before anything is allocated or launched, so a bad call raises
`KDA2InputError` (a ValueError naming the tensor, what it was and what is allowed) and leaves every
output and state untouched. The dense path does no host synchronisation and so can be captured in a
CUDA graph; varlen needs the longest sequence length on the host (see `max_seqlen`).

torch is imported on first call, never at import: a deployment without torch can still load a library
and drive it through `Library.launch_raw`.
"""
from __future__ import annotations

import ctypes
import math
from typing import Any

from kda2.runtime import abi, loader
from kda2.runtime.errors import KDA2InputError
from kda2.runtime.library import Library, ensure_context

_torch: Any = None
_BF16 = _F32 = _I32 = _I64 = None
_raw_stream: Any = None
_multi_gpu = False
_PACK = abi.ARGS_PACK.pack_into
_addressof = ctypes.addressof

_GATE_NAMES = abi.GATE_MODE_NAMES
_HOW_GATE = {
    "precomputed": "use_gate_in_kernel=False (g is the log decay)",
    "softplus": "use_gate_in_kernel=True, lower_bound=None",
    "lower_bound": "use_gate_in_kernel=True, lower_bound=<negative float>",
}


def _init_torch() -> Any:
    """Import torch once and bind what the hot path needs into module globals."""
    global _torch, _BF16, _F32, _I32, _I64, _raw_stream, _multi_gpu
    try:
        import torch
    except ImportError as exc:
        raise ImportError("kda2.runtime.fused_recurrent_kda needs torch; without it, drive the library "
                          "through Library.launch_raw with raw device pointers") from exc
    _BF16, _F32, _I32, _I64 = torch.bfloat16, torch.float32, torch.int32, torch.int64
    # The raw-stream getter inductor uses costs ~0.2 µs; current_stream() builds a Stream object (~2 µs).
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _raw_stream = raw if raw is not None else (lambda idx: torch.cuda.current_stream(idx).cuda_stream)
    _multi_gpu = torch.cuda.is_available() and torch.cuda.device_count() > 1
    _torch = torch
    return torch


def _fail(name: str, given: Any, allowed: str) -> KDA2InputError:
    return KDA2InputError(f"{name}: got {given}; allowed: {allowed}")


def _dt(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _spec(lib: Library) -> str:
    return f"spec {lib.spec} ({lib.arch})"


def _check_tensor(name: str, t: Any, dtypes: tuple, shape: tuple, dev: Any) -> None:
    """dtype, device, shape and contiguity of one tensor argument.

    One boolean expression on the success path (this runs ~8 times per call); the slow path below
    works out which property failed only when something did.
    """
    try:
        if t.dtype in dtypes and t.device == dev and t.shape == shape and t.is_contiguous():
            return
    except AttributeError:
        pass
    if not isinstance(t, _torch.Tensor):
        raise _fail(name, type(t).__name__, "a torch.Tensor")
    if t.dtype not in dtypes:
        raise _fail(f"{name} dtype", _dt(t.dtype), " or ".join(_dt(d) for d in dtypes))
    if t.device != dev:
        raise _fail(f"{name} device", t.device, f"the device of q ({dev}); all tensors must be on one CUDA device")
    if t.shape != shape:
        raise _fail(f"{name} shape", list(t.shape), str(list(shape)))
    raise _fail(name, f"a non-contiguous tensor (strides {t.stride()})", "a contiguous tensor (call .contiguous())")


def _prepare(lib: Library, q, k, v, g, beta, A_log, dt_bias, scale, use_qk_l2norm_in_kernel,
             use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first,
             cu_seqlens, cu_seqlens_cpu, max_seqlen, out):
    """Validate everything but the states; return the launch scalars (nothing allocated yet)."""
    f = lib.features
    # Device is checked last (only "same device as q" here), so every other check is testable on CPU.
    if not isinstance(q, _torch.Tensor) or q.ndim != 4:
        raise _fail("q shape", list(getattr(q, "shape", [])) or type(q).__name__, "a tensor [B, T, H, K]")
    dev = q.device
    B, T, H, K = q.shape
    if not isinstance(v, _torch.Tensor) or v.ndim != 4:
        raise _fail("v shape", list(getattr(v, "shape", [])) or type(v).__name__, "a tensor [B, T, HV, V]")
    HV, V = v.shape[2], v.shape[3]
    if K != lib.k:
        raise KDA2InputError(f"unsupported K={K}: this library was built for K={lib.k} ({_spec(lib)}); "
                             f"build a spec with head_dims.k: {K}")
    if V != lib.v:
        raise KDA2InputError(f"unsupported V={V}: this library was built for V={lib.v} ({_spec(lib)}); "
                             f"build a spec with head_dims.v: {V}")
    if H == 0 or HV % H:
        raise _fail("v heads", f"HV={HV} with H={H}", "HV a multiple of H (GVA: HV % H == 0)")
    ratio = HV // H
    if ratio not in f.gva_ratios:
        closest = min(f.gva_ratios, key=lambda r: (abs(r - ratio), r))
        raise KDA2InputError(f"GVA ratio HV/H={ratio} (HV={HV}, H={H}) is not built into {_spec(lib)}; built "
                             f"ratios: {list(f.gva_ratios)} (closest: {closest}); add {ratio} to features.gva_ratios")
    _check_tensor("q", q, (_BF16,), (B, T, H, K), dev)
    _check_tensor("k", k, (_BF16,), (B, T, H, K), dev)
    _check_tensor("v", v, (_BF16,), (B, T, HV, V), dev)
    _check_tensor("g", g, (_F32, _BF16), (B, T, HV, K), dev)
    if isinstance(beta, _torch.Tensor) and beta.ndim == 4:
        raise _fail("beta shape", list(beta.shape), f"[B, T, HV] = {[B, T, HV]} (per-channel beta is not supported)")
    _check_tensor("beta", beta, (_F32, _BF16), (B, T, HV), dev)
    if out is not None:
        _check_tensor("out", out, (_BF16,), (B, T, HV, V), dev)

    flags = 0
    if g.dtype is _BF16:
        flags |= abi.FLAG_G_BF16
    if beta.dtype is _BF16:
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
                raise _fail("A_log", None, f"a float32 tensor [HV]={[HV]}: the softplus gate "
                            "(use_gate_in_kernel=True, lower_bound=None) needs A_log")
        else:
            mode = abi.GATE_LOWER_BOUND
            lb = float(lower_bound)
            if not (lb < 0.0 and math.isfinite(lb)):
                raise _fail("lower_bound", lower_bound, "a finite negative float such as -5.0 (gates must be <= 0)")
        if A_log is not None:
            _check_tensor("A_log", A_log, (_F32,), (HV,), dev)
            flags |= abi.FLAG_HAS_A_LOG
            a_ptr = A_log.data_ptr()
        if dt_bias is not None:
            two_d = isinstance(dt_bias, _torch.Tensor) and dt_bias.ndim == 2  # [HV, K] is the same memory
            _check_tensor("dt_bias", dt_bias, (_F32,), (HV, K) if two_d else (HV * K,), dev)
            flags |= abi.FLAG_HAS_DT_BIAS
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
        N, longest = _check_varlen(lib, cu_seqlens, cu_seqlens_cpu, max_seqlen, B, T, dev)
    if longest > lib.max_bucket:
        raise KDA2InputError(f"T={longest} exceeds the largest seq_len bucket {lib.max_bucket} of {_spec(lib)}; "
                             "add a larger bucket to seq_len_buckets")
    if T > 0x7FFFFFFF or N > 0x7FFFFFFF:
        raise _fail("token count", T, "at most 2**31-1 tokens")
    scale = K ** -0.5 if scale is None else float(scale)
    return dev, N, B, T, H, HV, K, V, mode, flags, scale, lb, a_ptr, d_ptr, longest


def _device_index(lib: Library, dev: Any) -> int:
    """Last check of every call (so all others are reachable with CPU tensors in tests)."""
    _require_cuda(dev)
    idx = dev.index
    if idx not in lib._checked_devices:
        with _torch.cuda.device(idx):  # preload targets the current context: make it this device's
            lib.check_device(idx, tuple(_torch.cuda.get_device_capability(idx)))
    return idx


def _require_cuda(dev: Any) -> None:
    # A function of its own so the CPU tests can stub it and drive the whole path into a fake library.
    if dev.type != "cuda":
        raise _fail("q device", dev, "a CUDA device (the kernels run on the GPU)")


def _check_varlen(lib: Library, cu, cu_cpu, max_seqlen, B, T, dev):
    """Validate cu_seqlens; return (N, longest sequence). Syncs only when neither host hint is given."""
    if not lib.features.varlen:
        raise KDA2InputError(f"cu_seqlens given but varlen is not compiled into {_spec(lib)}; pad to dense "
                             "[B, T, ...] inputs, or build with features.varlen: true")
    if B != 1:
        raise _fail("q shape", f"B={B} with cu_seqlens", "B == 1 (pack the sequences along T, FlashAttention style)")
    if not isinstance(cu, _torch.Tensor) or cu.dtype not in (_I64, _I32):
        raise _fail("cu_seqlens dtype", _dt(getattr(cu, "dtype", type(cu).__name__)), "int64 (int32 is converted)")
    if cu.ndim != 1 or cu.numel() < 2:
        raise _fail("cu_seqlens shape", list(cu.shape), "[N+1] with N >= 1")
    if cu.device != dev:
        raise _fail("cu_seqlens device", cu.device, f"the device of q ({dev})")
    if not cu.is_contiguous():
        raise _fail("cu_seqlens", "a non-contiguous tensor", "a contiguous tensor")
    N = cu.numel() - 1
    host = None
    if cu_cpu is not None:
        if isinstance(cu_cpu, _torch.Tensor) and cu_cpu.device.type != "cpu":
            raise _fail("cu_seqlens_cpu device", cu_cpu.device, "cpu (a host copy; reading a device copy would sync)")
        host = cu_cpu.tolist() if isinstance(cu_cpu, _torch.Tensor) else list(cu_cpu)
        if len(host) != N + 1:
            raise _fail("cu_seqlens_cpu length", len(host), f"{N + 1} (= len(cu_seqlens))")
    elif max_seqlen is None:
        # Documented host sync: the longest sequence picks the kernel variant. Pass cu_seqlens_cpu or
        # max_seqlen to avoid it (required under CUDA graph capture, where a sync is illegal).
        if cu.is_cuda and _torch.cuda.is_current_stream_capturing():
            raise KDA2InputError("cu_seqlens under CUDA graph capture needs cu_seqlens_cpu= or max_seqlen= "
                                 "(reading cu_seqlens back would synchronise the capturing stream)")
        host = cu.tolist()
    if host is not None:
        if host[0] != 0 or host[-1] != T or any(b < a for a, b in zip(host, host[1:])):
            raise _fail("cu_seqlens values", host if len(host) <= 16 else f"{host[:8]}...{host[-4:]}",
                        f"non-decreasing offsets from 0 to the token count T={T}")
        longest = max(b - a for a, b in zip(host, host[1:]))
        if max_seqlen is not None and int(max_seqlen) < longest:
            raise _fail("max_seqlen", max_seqlen, f">= the longest sequence ({longest})")
    else:
        longest = int(max_seqlen)  # the caller's promise; too small would pick a variant for shorter inputs
        if longest < 0:
            raise _fail("max_seqlen", max_seqlen, "a non-negative int")
    return N, longest


def _launch(lib: Library, dev_index: int, q, k, v, g, beta, a_ptr: int, d_ptr: int, o, h0_ptr: int, ht_ptr: int,
            cu_ptr: int, idx_ptr: int, N: int, T: int, H: int, HV: int, scale: float, lb: float, mode: int,
            flags: int, v_first: bool, max_seqlen: int) -> None:
    args = lib.args()
    _PACK(args, 0, q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(), a_ptr, d_ptr,
          o.data_ptr(), h0_ptr, ht_ptr, cu_ptr, idx_ptr, N, T, H, HV, scale, lb, mode, flags,
          1 if v_first else 0, 0)
    if _multi_gpu and _torch.cuda.current_device() != dev_index:
        with _torch.cuda.device(dev_index):  # the .so launches on the calling thread's current device
            rc = lib._fwd(_addressof(args), max_seqlen, _raw_stream(dev_index))
    else:
        rc = lib._fwd(_addressof(args), max_seqlen, _raw_stream(dev_index))
    if rc == abi.ERR_NO_CONTEXT:  # a thread that has not touched CUDA yet: bind the primary context, retry
        ensure_context(dev_index)
        rc = lib._fwd(_addressof(args), max_seqlen, _raw_stream(dev_index))
    if rc:
        raise lib.error(rc)


def _library(library: Library | None) -> Library:
    if library is not None:
        if not isinstance(library, Library):
            raise _fail("library", type(library).__name__, "a kda2.runtime.Library (kda2.runtime.load(path))")
        return library
    return loader._default or loader.default_library()


def _state_shape(N: int, HV: int, K: int, V: int, v_first: bool) -> tuple:
    return (N, HV, V, K) if v_first else (N, HV, K, V)


def fused_recurrent_kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None, initial_state=None,
                        output_final_state=False, use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                        use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None,
                        state_v_first=False, cu_seqlens=None, *, library: Library | None = None,
                        cu_seqlens_cpu=None, max_seqlen: int | None = None, out=None, final_state_out=None,
                        **kwargs):
    """KDA forward by token recurrence, drop-in for `fla.ops.kda.fused_recurrent_kda` (FLA 0.6).

    Shapes (FLA): q, k [B, T, H, K] bf16; v [B, T, HV, V] bf16; g [B, T, HV, K] fp32 or bf16; beta
    [B, T, HV] fp32 or bf16; A_log [HV] fp32; dt_bias [HV*K] fp32; states fp32 [N, HV, K, V]
    ([N, HV, V, K] with state_v_first). Returns (o [B, T, HV, V] bf16, final_state or None).

    Keyword-only extras: `library` (default: `kda2.runtime.default_library()`); `cu_seqlens_cpu`
    (host copy of cu_seqlens) or `max_seqlen` (the longest sequence; a promise, not checked) — without
    either, varlen reads cu_seqlens back to the host, which synchronises and cannot be graph-captured;
    `out` / `final_state_out`: preallocated outputs (graph capture, or to reuse buffers).
    """
    torch = _torch or _init_torch()
    lib = _library(library)
    if kwargs:
        state_v_first = _legacy_kwargs(kwargs, state_v_first)
    (dev, N, B, T, H, HV, K, V, mode, flags, scale, lb, a_ptr, d_ptr, longest) = _prepare(
        lib, q, k, v, g, beta, A_log, dt_bias, scale, use_qk_l2norm_in_kernel, use_gate_in_kernel,
        use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first, cu_seqlens, cu_seqlens_cpu,
        max_seqlen, out)
    sshape = _state_shape(N, HV, K, V, state_v_first)
    if initial_state is not None:
        _check_tensor("initial_state", initial_state, (_F32,), sshape, dev)
    if final_state_out is not None:
        if not output_final_state:
            raise _fail("final_state_out", "a tensor with output_final_state=False", "output_final_state=True")
        _check_tensor("final_state_out", final_state_out, (_F32,), sshape, dev)
    dev_index = _device_index(lib, dev)
    # -- validation done: allocate and launch --------------------------------------------------------
    o = torch.empty_like(v) if out is None else out
    ht = None
    if output_final_state:
        ht = final_state_out if final_state_out is not None else torch.empty(sshape, dtype=_F32, device=dev)
    if B * T == 0:  # no tokens: nothing to launch; the final state is the initial one
        if ht is not None and initial_state is not None:
            ht.copy_(initial_state)
        elif ht is not None:
            ht.zero_()
        return o, ht
    cu = cu_seqlens
    if cu is not None and cu.dtype is not _I64:
        cu = cu.to(_I64)  # stream-ordered temporary; the caching allocator keeps it alive long enough
    _launch(lib, dev_index, q, k, v, g, beta, a_ptr, d_ptr, o,
            0 if initial_state is None else initial_state.data_ptr(), 0 if ht is None else ht.data_ptr(),
            0 if cu is None else cu.data_ptr(), 0, N, T, H, HV, scale, lb, mode, flags, state_v_first, longest)
    return o, ht


def fused_recurrent_kda_pool(q, k, v, g, beta, state_pool, ssm_state_indices, A_log=None, dt_bias=None, scale=None,
                             use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                             use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None,
                             state_v_first=False, cu_seqlens=None, *, library: Library | None = None,
                             cu_seqlens_cpu=None, max_seqlen: int | None = None, out=None):
    """Serving form: sequence n reads and writes row `ssm_state_indices[n]` of `state_pool` IN PLACE.

    state_pool: fp32 [P, HV, K, V] ([P, HV, V, K] with state_v_first); ssm_state_indices: [N] int32
    (int64 is converted). A negative index means "no state": the sequence starts from zeros and its
    state is not written. Non-negative indices must be distinct and < P (not checked: that would need
    a host sync). Returns o [B, T, HV, V] bf16; rows of the pool not referenced are left unchanged.
    """
    torch = _torch or _init_torch()
    lib = _library(library)
    (dev, N, B, T, H, HV, K, V, mode, flags, scale, lb, a_ptr, d_ptr, longest) = _prepare(
        lib, q, k, v, g, beta, A_log, dt_bias, scale, use_qk_l2norm_in_kernel, use_gate_in_kernel,
        use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first, cu_seqlens, cu_seqlens_cpu,
        max_seqlen, out)
    if not isinstance(state_pool, torch.Tensor) or state_pool.ndim != 4:
        raise _fail("state_pool shape", list(getattr(state_pool, "shape", [])),
                    f"[P, HV, V, K] = [P, {HV}, {V}, {K}]" if state_v_first else f"[P, HV, K, V] = [P, {HV}, {K}, {V}]")
    P = state_pool.shape[0]
    _check_tensor("state_pool", state_pool, (_F32,), (P, HV, V, K) if state_v_first else (P, HV, K, V), dev)
    idx = ssm_state_indices
    _check_tensor("ssm_state_indices", idx, (_I32, _I64), (N,), dev)
    dev_index = _device_index(lib, dev)
    # -- validation done: allocate and launch --------------------------------------------------------
    o = torch.empty_like(v) if out is None else out
    if B * T == 0:
        return o
    if idx.dtype is not _I32:
        idx = idx.to(_I32)
    cu = cu_seqlens
    if cu is not None and cu.dtype is not _I64:
        cu = cu.to(_I64)
    pool = state_pool.data_ptr()
    _launch(lib, dev_index, q, k, v, g, beta, a_ptr, d_ptr, o, pool, pool, 0 if cu is None else cu.data_ptr(),
            idx.data_ptr(), N, T, H, HV, scale, lb, mode, flags, state_v_first, longest)
    return o


def _legacy_kwargs(kwargs: dict, state_v_first: bool) -> bool:
    """FLA's deprecated `transpose_state_layout` alias; any other unknown keyword is an error, not ignored."""
    if "transpose_state_layout" in kwargs:
        if state_v_first:
            raise KDA2InputError("pass either state_v_first or the deprecated transpose_state_layout, not both")
        state_v_first = bool(kwargs.pop("transpose_state_layout"))
    if kwargs:
        raise TypeError(f"fused_recurrent_kda() got unexpected keyword arguments {sorted(kwargs)}")
    return state_v_first
