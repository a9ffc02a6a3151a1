"""A serving loop's hot path: validate a `fused_recurrent_kda_pool` call once, then launch it cheaply.

`prepare_pool(...)` takes the same arguments as `fused_recurrent_kda_pool` (example tensors of the
shapes the loop will use) and runs the full validation. The returned `PreparedPool` is called with
tensors of exactly those shapes, dtypes and device each step; it checks just that (tuple equality,
identity of dtypes, device index, contiguity) and launches, skipping the option parsing and the
signature-keyed cache of the general entry, which cost about 5 µs of Python per call. A tensor that
does not match raises `KDA2InputError` before any launch, as the general entry would.
"""
from __future__ import annotations

import ctypes
from kda2.runtime import abi
from kda2.runtime import params as _params
from kda2.runtime import validate as _v
from kda2.runtime.api import _init_torch, _relaunch
from kda2.runtime.errors import KDA2InputError
from kda2.runtime.library import Library

_PACK = abi.ARGS_PACK.pack_into
_addressof = ctypes.addressof
_MON = None  # the active kda2.runtime.monitor.Monitor, or None (see api._MON)


class PreparedPool:
    """Launches one validated (shapes, dtypes, options) form of the serving call; see prepare_pool."""

    __slots__ = ("_lib", "_dev", "_sig", "_scalars", "_a_ptr", "_d_ptr", "_raw_stream", "_torch", "_args",
                 "_args_addr", "_keep")

    def __init__(self, lib: Library, dev_index: int, sig: tuple, scalars: tuple, a_ptr: int, d_ptr: int,
                 keep: tuple) -> None:
        torch = _init_torch()
        self._lib, self._dev, self._sig, self._scalars = lib, dev_index, sig, scalars
        self._a_ptr, self._d_ptr, self._keep = a_ptr, d_ptr, keep  # keep A_log / dt_bias alive
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._raw_stream = raw if raw is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream)
        self._torch = torch
        self._args = abi.KDA2RecurrentArgs()
        self._args_addr = _addressof(self._args)

    def __call__(self, q, k, v, g, beta, state_pool, ssm_state_indices, out=None):
        # One flat condition (no loop, no tuples built): this is the whole per-step Python cost.
        (qs, qd), (ks, kd), (vs, vd), (gs, gd), (bs, bd), (ps, pd), (xs, xd) = self._sig
        dev = self._dev
        if not (q.shape == qs and k.shape == ks and v.shape == vs and g.shape == gs and beta.shape == bs
                and state_pool.shape == ps and ssm_state_indices.shape == xs
                and q.dtype is qd and k.dtype is kd and v.dtype is vd and g.dtype is gd and beta.dtype is bd
                and state_pool.dtype is pd and ssm_state_indices.dtype is xd
                and q.get_device() == dev and k.get_device() == dev and v.get_device() == dev
                and g.get_device() == dev and beta.get_device() == dev and state_pool.get_device() == dev
                and ssm_state_indices.get_device() == dev
                and q.is_contiguous() and k.is_contiguous() and v.is_contiguous() and g.is_contiguous()
                and beta.is_contiguous() and state_pool.is_contiguous() and ssm_state_indices.is_contiguous()):
            raise self._mismatch((q, k, v, g, beta, state_pool, ssm_state_indices))
        if out is None:
            out = self._torch.empty_like(v)
        elif out.shape != vs or out.dtype is not vd or out.get_device() != dev or not out.is_contiguous():
            raise KDA2InputError(f"out: {tuple(out.shape)} {out.dtype} on device {out.get_device()}; allowed: "
                                 f"contiguous {tuple(vs)} {vd} on cuda:{dev}")
        N, T, H, HV, scale, lb, mode, flags, v_first, longest = self._scalars
        pool = state_pool.data_ptr()
        args = self._args
        _PACK(args, 0, q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(), self._a_ptr,
              self._d_ptr, out.data_ptr(), pool, pool, 0, ssm_state_indices.data_ptr(), N, T, H, HV, scale, lb,
              mode, flags, v_first, 0, 0, 0, 0, 0)
        if _MON:
            _MON.launch("prepare_pool", self._lib, args, dev, longest, self._raw_stream(dev))
        elif self._lib._fwd(self._args_addr, longest, self._raw_stream(dev)):
            _relaunch(self._lib, args, dev, longest)
        return out

    def _mismatch(self, tensors) -> KDA2InputError:
        names = ("q", "k", "v", "g", "beta", "state_pool", "ssm_state_indices")
        for name, t, (shape, dtype) in zip(names, tensors, self._sig):
            if t.shape != shape or t.dtype is not dtype or t.get_device() != self._dev or not t.is_contiguous():
                return KDA2InputError(
                    f"{name}: {tuple(t.shape)} {t.dtype} on device {t.get_device()}"
                    f"{'' if t.is_contiguous() else ' (not contiguous)'}; this prepared call takes contiguous "
                    f"{tuple(shape)} {dtype} on cuda:{self._dev} (prepare another for other shapes)")
        return KDA2InputError("tensor mismatch")  # unreachable: __call__ saw one


def prepare_pool(q, k, v, g, beta, state_pool, ssm_state_indices, A_log=None, dt_bias=None, scale=None,
                 use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                 allow_neg_eigval=False, lower_bound=None, state_v_first=False, *,
                 library: Library | None = None) -> PreparedPool:
    """Validate a dense `fused_recurrent_kda_pool` call (no varlen) and return its cheap launcher.

    A_log and dt_bias are bound here (they are a layer's parameters; fp16 ones as fp32 copies taken now, so a
    later in-place update of them is not seen); q/k/v/g/beta, the pool, the indices and `out` are passed per call
    and must keep the example's shapes, dtypes and device.
    """
    torch = _init_torch()
    if not _v.forward_only_warned and torch.is_grad_enabled():
        _v.warn_forward_only("prepare_pool", q, k, v, g, beta, A_log, dt_bias)
    if use_gate_in_kernel:
        A_log, dt_bias = _params.gate_params(A_log, dt_bias, "recurrent")
    lib = _v.looked_up(lambda: _v.library_arg(library) if library is not None else _v.default_for("recurrent", q, v),
                       q, k, v, g, beta, required=(("state_pool", state_pool), ("ssm_state_indices", ssm_state_indices)),
                       optional=(("A_log", A_log), ("dt_bias", dt_bias)))
    (dev, N, B, T, H, HV, K, V, mode, flags, scale, lb, a_ptr, d_ptr, longest) = _v.prepare(
        lib, q, k, v, g, beta, A_log, dt_bias, scale, use_qk_l2norm_in_kernel, use_gate_in_kernel,
        use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first, None, None, None, None)
    if not isinstance(state_pool, torch.Tensor):
        raise _v.not_tensor("state_pool", state_pool)
    if state_pool.ndim != 4:
        raise _v.fail("state_pool shape", list(state_pool.shape),
                      f"[P, HV, V, K] = [P, {HV}, {V}, {K}]" if state_v_first else f"[P, HV, K, V] = [P, {HV}, {K}, {V}]")
    P = state_pool.shape[0]
    _v.check_tensor("state_pool", state_pool, _v.state_dtypes(lib), (P, HV, V, K) if state_v_first else (P, HV, K, V),
                    dev)
    flags |= _v.state_flag(lib, state_pool.dtype, longest, state_v_first, "state_pool")
    _v.check_tensor("ssm_state_indices", ssm_state_indices, (torch.int32,), (N,), dev)
    dev_index = _v.device_index(lib, dev)
    sig = tuple((t.shape, t.dtype) for t in (q, k, v, g, beta, state_pool, ssm_state_indices))
    scalars = (N, T, H, HV, scale, lb, mode, flags, 1 if state_v_first else 0, longest)
    return PreparedPool(lib, dev_index, sig, scalars, a_ptr, d_ptr, keep=(A_log, dt_bias))


__all__ = ["PreparedPool", "prepare_pool"]
