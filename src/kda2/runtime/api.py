"""FLA-compatible torch API: `fused_recurrent_kda` (FLA 0.6 signature) and the serving form
`fused_recurrent_kda_pool` (vLLM-style state pool updated in place).

Every argument is validated before anything is allocated or launched (but for the fp32 copy of gate parameters the
kernels do not read as given, made once per parameter: kda2.runtime.params), so a bad call raises
`KDA2InputError` (a ValueError naming the tensor, what it was and what is allowed) and leaves every
output and state untouched. No path synchronises with the host, so every call can be captured in a CUDA
graph: varlen with only a device `cu_seqlens` bounds the longest sequence by the token count (the
kernels find each sequence's bounds on device); `cu_seqlens_cpu` / `max_seqlen` are optional hints.

torch is imported on first call, never at import: a deployment without torch can still load a library
and drive it through `Library.launch_raw`.
"""
from __future__ import annotations

import ctypes
from typing import Any

from kda2.runtime import abi, loader
from kda2.runtime import params as _params
from kda2.runtime import validate as _v
from kda2.runtime.library import Library, ensure_context

# Bound by _init_torch() on the first call (the runtime imports without torch).
_torch: Any = None
_F32 = _I32 = _I64 = None
_raw_stream: Any = None
_multi_gpu = False
_PACK = abi.ARGS_PACK.pack_into
_addressof = ctypes.addressof
_HAS_A, _HAS_DT = abi.FLAG_HAS_A_LOG, abi.FLAG_HAS_DT_BIAS
#: The active kda2.runtime.monitor.Monitor, or None (set by monitor.enable/disable): each launch site
#: checks it once and, when on, lets the monitor launch (and sometimes time) the call.
_MON: Any = None

#: Fast path: call signature -> launch scalars of a call that passed full validation. The key holds
#: exactly what validation read except contiguity and addresses (shape, dtype and device index of every
#: tensor, every option, the library), so a hit only skips re-deriving the same verdict; contiguity is
#: re-checked and pointers re-read on every call. One dict lookup replaces ~60 checks (about half the
#: per-call Python time). Dense (non-varlen) calls only: varlen verdicts depend on cu_seqlens' values.
_fast: dict = {}
_FAST_MAX = 1024


def _remember(key: Any, value: tuple) -> None:
    if key is not None:
        if len(_fast) >= _FAST_MAX:  # many distinct shapes (e.g. every batch size): start over
            _fast.clear()
        _fast[key] = value


def _init_torch() -> Any:
    """Import torch once and bind what the hot path needs into module globals."""
    global _torch, _F32, _I32, _I64, _raw_stream, _multi_gpu
    torch = _v.init_torch()
    _F32, _I32, _I64 = torch.float32, torch.int32, torch.int64
    # The raw-stream getter inductor uses costs ~0.2 µs; current_stream() builds a Stream object (~2 µs).
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _raw_stream = raw if raw is not None else (lambda idx: torch.cuda.current_stream(idx).cuda_stream)
    _multi_gpu = torch.cuda.is_available() and torch.cuda.device_count() > 1
    _torch = torch
    return torch


def _launch(lib: Library, dev_index: int, q, k, v, g, beta, a_ptr: int, d_ptr: int, o, h0_ptr: int, ht_ptr: int,
            cu_ptr: int, idx_ptr: int, N: int, T: int, H: int, HV: int, scale: float, lb: float, mode: int,
            flags: int, v_first: bool, max_seqlen: int, inter_ptr: int = 0) -> None:
    args = lib.args()
    _PACK(args, 0, q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(), a_ptr, d_ptr,
          o.data_ptr(), h0_ptr, ht_ptr, cu_ptr, idx_ptr, N, T, H, HV, scale, lb, mode, flags,
          1 if v_first else 0, 0, 0, 0, 0, inter_ptr)
    if _MON:
        _MON.launch("fused_recurrent_kda_pool" if idx_ptr else "fused_recurrent_kda", lib, args, dev_index,
                    max_seqlen, _raw_stream(dev_index))
    elif _multi_gpu or lib._fwd(_addressof(args), max_seqlen, _raw_stream(dev_index)):
        _relaunch(lib, args, dev_index, max_seqlen)


def _relaunch(lib: Library, args: abi.KDA2RecurrentArgs, dev_index: int, max_seqlen: int) -> None:
    """The uncommon launch: several GPUs, or the first launch failed (no context on this thread yet).

    Relaunching after a failure is safe: every non-zero return of kda2_fwd happens before the kernel is
    enqueued (selection, feature check, module load, or the launch call itself); for a chunk library at
    most its prep kernel was enqueued, which only rewrites the workspace.
    """
    if _multi_gpu and _torch.cuda.current_device() != dev_index:
        with _torch.cuda.device(dev_index):  # the .so launches in the calling thread's current context
            rc = lib._fwd(_addressof(args), max_seqlen, _raw_stream(dev_index))
    else:
        rc = lib._fwd(_addressof(args), max_seqlen, _raw_stream(dev_index))
    if rc == abi.ERR_NO_CONTEXT:  # a thread that has not touched CUDA yet: bind the primary context, retry
        ensure_context(dev_index)
        rc = lib._fwd(_addressof(args), max_seqlen, _raw_stream(dev_index))
    if rc:
        raise lib.error(rc)


def outputs(torch, v, out, output_final_state: bool, final_state_out, sshape: tuple, dev, sdtype=None):
    """o (given or like v) and the final state (given, new in `sdtype` (default fp32), or None): the calls'
    outputs, after validation."""
    o = torch.empty_like(v) if out is None else out
    ht = None
    if output_final_state:
        ht = final_state_out if final_state_out is not None else torch.empty(sshape, dtype=sdtype or torch.float32,
                                                                             device=dev)
    return o, ht


def check_intermediate(lib: Library, inter, B: int, T: int, HV: int, K: int, V: int, v_first: bool, longest: int,
                       dev, sdtype=None) -> tuple[int, int]:
    """`intermediate_states_out`: [B, T, HV, K, V] ([.., V, K] with state_v_first; B = 1 with varlen) in the
    state dtype, the state after every token (speculative decoding keeps them to roll back rejected tokens).
    Only the multi-token decode buckets' kernels write them (Library.intermediate_max_t). Returns (its pointer or
    0, the length to route the call by: the T = 1 kernels keep no per-token states, so a call asking for them
    routes at the first bucket whose kernel does)."""
    if inter is None:
        return 0, longest
    _v.check_tensor("intermediate_states_out", inter, (sdtype or _F32,), (B, T, HV) + ((V, K) if v_first else (K, V)),
                    dev)
    most = lib.intermediate_max_t(v_first)
    if longest > most:
        raise _v.fail("intermediate_states_out", f"a call of up to {longest} tokens per sequence",
                      f"sequences of at most {most} tokens (the multi-token decode buckets of {_v._spec(lib)} that "
                      "are compiled with per-token states; with a device-only cu_seqlens pass max_seqlen=)")
    return inter.data_ptr(), max(longest, lib.intermediate_min_t(v_first))


def no_tokens(ht, initial_state):
    """A call without tokens launches nothing: its final state is the initial one (or zeros)."""
    if ht is not None:
        if initial_state is not None:
            ht.copy_(initial_state)
        else:
            ht.zero_()
    return ht


def fused_recurrent_kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale=None, initial_state=None,
                        output_final_state=False, use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                        use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None,
                        state_v_first=False, cu_seqlens=None, *, library: Library | None = None,
                        cu_seqlens_cpu=None, max_seqlen: int | None = None, out=None, final_state_out=None,
                        intermediate_states_out=None, **kwargs):
    """KDA forward by token recurrence, drop-in for `fla.ops.kda.fused_recurrent_kda` (FLA 0.6).

    Shapes (FLA): q, k [B, T, H, K] and v [B, T, HV, V] in bf16 or fp16 (the spec's input_dtypes), any
    HV % H == 0; g [B, T, HV, K] fp32 or the input dtype; beta [B, T, HV] fp32 or the input dtype;
    A_log [HV] and dt_bias [HV*K] fp32, bf16 or fp16 (fp16 or strided ones are read from an fp32 copy: kda2.runtime.params); states fp32 [N, HV, K, V] ([N, HV, V, K] with
    state_v_first), or bf16 (h0 and ht alike; calls up to the decode buckets of a spec with
    bf16_decode_state). Returns (o [B, T, HV, V] in the input dtype, final_state or None).

    Keyword-only extras: `library` (default: the built recurrent library for these head dims);
    `cu_seqlens_cpu` (host copy of cu_seqlens, checked) or `max_seqlen` (the longest sequence; a promise):
    optional hints that pick a tighter bucket, never needed (nothing is read back from the device);
    `out` / `final_state_out`: preallocated outputs (graph capture, or to reuse buffers);
    `intermediate_states_out`: [B, T, HV, K, V] (state layout and dtype) receiving the state after every
    token (calls up to the decode buckets: Library.intermediate_max_t).
    """
    torch = _torch or _init_torch()
    if not _v.forward_only_warned and torch.is_grad_enabled():
        _v.warn_forward_only("fused_recurrent_kda", q, k, v, g, beta, A_log, dt_bias, initial_state)
    if kwargs:  # before the library lookup: a mistyped keyword is a TypeError whether or not a library is found
        state_v_first = _v.legacy_kwargs(kwargs, state_v_first)
    if use_gate_in_kernel:
        A_log, dt_bias = _params.gate_params(A_log, dt_bias, "recurrent")
    lib = library if library is not None else loader._default or _v.looked_up(
        lambda: _v.default_for("recurrent", q, v), q, k, v, g, beta, out, optional=(
            ("A_log", A_log), ("dt_bias", dt_bias), ("initial_state", initial_state),
            ("final_state_out", final_state_out), ("cu_seqlens", cu_seqlens),
            ("intermediate_states_out", intermediate_states_out)))
    key = None
    if cu_seqlens is None and cu_seqlens_cpu is None and intermediate_states_out is None:
        try:
            key = (0, lib, q.shape, q.dtype, q.get_device(), k.shape, k.dtype, k.get_device(), v.shape, v.dtype,
                   v.get_device(), g.shape, g.dtype, g.get_device(), beta.shape, beta.dtype, beta.get_device(),
                   None if A_log is None else (A_log.shape, A_log.dtype, A_log.get_device()),
                   None if dt_bias is None else (dt_bias.shape, dt_bias.dtype, dt_bias.get_device()),
                   None if initial_state is None else (initial_state.shape, initial_state.dtype,
                                                       initial_state.get_device()),
                   None if out is None else (out.shape, out.dtype, out.get_device()),
                   None if final_state_out is None else (final_state_out.shape, final_state_out.dtype,
                                                         final_state_out.get_device()),
                   scale, output_final_state, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel,
                   allow_neg_eigval, lower_bound, state_v_first)
            hit = _fast.get(key)
        except (AttributeError, TypeError):  # not tensors / unhashable: the full checks will say what
            key = hit = None
        if (hit is not None and q.is_contiguous() and k.is_contiguous() and v.is_contiguous() and g.is_contiguous()
                and beta.is_contiguous() and (A_log is None or A_log.is_contiguous())
                and (dt_bias is None or dt_bias.is_contiguous())
                and (initial_state is None or initial_state.is_contiguous())
                and (out is None or out.is_contiguous())
                and (final_state_out is None or final_state_out.is_contiguous())):
            dev_index, N, T, H, HV, mode, flags, sc, lb, longest, sshape, v_first, sdtype = hit
            o = torch.empty_like(v) if out is None else out
            ht = None
            if output_final_state:
                ht = (final_state_out if final_state_out is not None
                      else torch.empty(sshape, dtype=sdtype, device=v.device))
            args = lib.args()
            _PACK(args, 0, q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(),
                  A_log.data_ptr() if flags & _HAS_A else 0, dt_bias.data_ptr() if flags & _HAS_DT else 0,
                  o.data_ptr(), 0 if initial_state is None else initial_state.data_ptr(),
                  0 if ht is None else ht.data_ptr(), 0, 0, N, T, H, HV, sc, lb, mode, flags, v_first, 0, 0, 0, 0, 0)
            if _MON:
                _MON.launch("fused_recurrent_kda", lib, args, dev_index, longest, _raw_stream(dev_index))
            elif _multi_gpu or lib._fwd(_addressof(args), longest, _raw_stream(dev_index)):
                _relaunch(lib, args, dev_index, longest)  # another device current, no context yet, or an error
            return o, ht
    lib = _v.library_arg(library) if library is not None else lib
    (dev, N, B, T, H, HV, K, V, mode, flags, scale, lb, a_ptr, d_ptr, longest) = _v.prepare(
        lib, q, k, v, g, beta, A_log, dt_bias, scale, use_qk_l2norm_in_kernel, use_gate_in_kernel,
        use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first, cu_seqlens, cu_seqlens_cpu,
        max_seqlen, out)
    sshape = _v.state_shape(N, HV, K, V, state_v_first)
    # States: fp32, or bf16 (opt-in decode form) -- one dtype for h0, ht and the per-token states.
    sdtypes = _v.state_dtypes(lib)
    sdtype = next((t.dtype for t in (initial_state, final_state_out) if isinstance(t, torch.Tensor)), _F32)
    sdtype = sdtype if sdtype in sdtypes else _F32
    if initial_state is not None:
        _v.check_tensor("initial_state", initial_state, sdtypes, sshape, dev)
    if final_state_out is not None:
        if not output_final_state:
            raise _v.fail("final_state_out", "a tensor with output_final_state=False", "output_final_state=True")
        _v.check_tensor("final_state_out", final_state_out, (sdtype,), sshape, dev)
    flags |= _v.state_flag(lib, sdtype, longest, state_v_first, "initial_state" if initial_state is not None
                           else "final_state_out")
    inter_ptr, longest = check_intermediate(lib, intermediate_states_out, B, T, HV, K, V, state_v_first, longest, dev,
                                            sdtype)
    dev_index = _v.device_index(lib, dev)
    # -- validation done: allocate and launch --------------------------------------------------------
    o, ht = outputs(torch, v, out, output_final_state, final_state_out, sshape, dev, sdtype)
    if B * T == 0:
        return o, no_tokens(ht, initial_state)
    cu = cu_seqlens
    if cu is not None and cu.dtype is not _I64:
        cu = cu.to(_I64)  # stream-ordered temporary; the caching allocator keeps it alive long enough
    _launch(lib, dev_index, q, k, v, g, beta, a_ptr, d_ptr, o,
            0 if initial_state is None else initial_state.data_ptr(), 0 if ht is None else ht.data_ptr(),
            0 if cu is None else cu.data_ptr(), 0, N, T, H, HV, scale, lb, mode, flags, state_v_first, longest,
            inter_ptr)
    _remember(key, (dev_index, N, T, H, HV, mode, flags, scale, lb, longest, sshape, 1 if state_v_first else 0,
                    sdtype))
    return o, ht


def fused_recurrent_kda_pool(q, k, v, g, beta, state_pool, ssm_state_indices, A_log=None, dt_bias=None, scale=None,
                             use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                             use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None,
                             state_v_first=False, cu_seqlens=None, *, library: Library | None = None,
                             cu_seqlens_cpu=None, max_seqlen: int | None = None, out=None,
                             intermediate_states_out=None):
    """Serving form: sequence n reads and writes row `ssm_state_indices[n]` of `state_pool` IN PLACE.

    state_pool: fp32 [P, HV, K, V] ([P, HV, V, K] with state_v_first), or bf16 (half the bytes) where the spec
    has bf16_decode_state, for calls up to its decode buckets; ssm_state_indices: [N] int32
    (int64 is converted). A negative index means "no state": the sequence starts from zeros and its
    state is not written. Non-negative indices must be distinct and < P (not checked: that would need
    a host sync). Returns o [B, T, HV, V] in the input dtype; rows of the pool not referenced are left
    unchanged. Multi-token decode (speculative verify): q/k/v/g/beta [N, T, ...] with T = 2..8 reads and
    writes each pool row once; `intermediate_states_out` ([N, T, HV, K, V], the pool's layout and dtype)
    receives the state after every token, so rejected tokens can be rolled back by copying row t - 1 back.
    The other arguments are fused_recurrent_kda's (scale K ** -0.5 by default; the gate flags, A_log / dt_bias,
    lower_bound and state_v_first as there; `cu_seqlens` packs N sequences as [1, total, ...]; `max_seqlen` a
    promise of the longest; `out` preallocated o; `library` a kda2.load(...) result). T runs up to the spec's
    largest seq_len bucket (Library.max_bucket); intermediate_states_out only up to Library.intermediate_max_t.
    Raises KDA2InputError (a ValueError) naming a wrong argument before any launch, ArtifactError without a fit.
    """
    torch = _torch or _init_torch()
    if not _v.forward_only_warned and torch.is_grad_enabled():
        _v.warn_forward_only("fused_recurrent_kda_pool", q, k, v, g, beta, A_log, dt_bias)
    if use_gate_in_kernel:
        A_log, dt_bias = _params.gate_params(A_log, dt_bias, "recurrent")
    lib = library if library is not None else loader._default or _v.looked_up(
        lambda: _v.default_for("recurrent", q, v), q, k, v, g, beta, out, required=(
            ("state_pool", state_pool), ("ssm_state_indices", ssm_state_indices)), optional=(
            ("A_log", A_log), ("dt_bias", dt_bias), ("cu_seqlens", cu_seqlens),
            ("intermediate_states_out", intermediate_states_out)))
    key = None
    if cu_seqlens is None and cu_seqlens_cpu is None and intermediate_states_out is None:
        try:
            key = (1, lib, q.shape, q.dtype, q.get_device(), k.shape, k.dtype, k.get_device(), v.shape, v.dtype,
                   v.get_device(), g.shape, g.dtype, g.get_device(), beta.shape, beta.dtype, beta.get_device(),
                   state_pool.shape, state_pool.dtype, state_pool.get_device(), ssm_state_indices.shape,
                   ssm_state_indices.dtype, ssm_state_indices.get_device(),
                   None if A_log is None else (A_log.shape, A_log.dtype, A_log.get_device()),
                   None if dt_bias is None else (dt_bias.shape, dt_bias.dtype, dt_bias.get_device()),
                   None if out is None else (out.shape, out.dtype, out.get_device()),
                   scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                   lower_bound, state_v_first)
            hit = _fast.get(key)
        except (AttributeError, TypeError):  # not tensors / unhashable: the full checks will say what
            key = hit = None
        if (hit is not None and q.is_contiguous() and k.is_contiguous() and v.is_contiguous() and g.is_contiguous()
                and beta.is_contiguous() and state_pool.is_contiguous() and ssm_state_indices.is_contiguous()
                and (A_log is None or A_log.is_contiguous()) and (dt_bias is None or dt_bias.is_contiguous())
                and (out is None or out.is_contiguous())):
            dev_index, N, T, H, HV, mode, flags, sc, lb, longest, v_first = hit
            o = torch.empty_like(v) if out is None else out
            idx = ssm_state_indices if ssm_state_indices.dtype is _I32 else ssm_state_indices.to(_I32)
            pool = state_pool.data_ptr()
            args = lib.args()
            _PACK(args, 0, q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(),
                  A_log.data_ptr() if flags & _HAS_A else 0, dt_bias.data_ptr() if flags & _HAS_DT else 0,
                  o.data_ptr(), pool, pool, 0, idx.data_ptr(), N, T, H, HV, sc, lb, mode, flags, v_first, 0, 0, 0, 0, 0)
            if _MON:
                _MON.launch("fused_recurrent_kda_pool", lib, args, dev_index, longest, _raw_stream(dev_index))
            elif _multi_gpu or lib._fwd(_addressof(args), longest, _raw_stream(dev_index)):
                _relaunch(lib, args, dev_index, longest)  # another device current, no context yet, or an error
            return o
    lib = _v.library_arg(library) if library is not None else lib
    (dev, N, B, T, H, HV, K, V, mode, flags, scale, lb, a_ptr, d_ptr, longest) = _v.prepare(
        lib, q, k, v, g, beta, A_log, dt_bias, scale, use_qk_l2norm_in_kernel, use_gate_in_kernel,
        use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first, cu_seqlens, cu_seqlens_cpu,
        max_seqlen, out)
    if not isinstance(state_pool, torch.Tensor):
        raise _v.not_tensor("state_pool", state_pool)
    if state_pool.ndim != 4:
        raise _v.fail("state_pool shape", list(state_pool.shape),
                    f"[P, HV, V, K] = [P, {HV}, {V}, {K}]" if state_v_first else f"[P, HV, K, V] = [P, {HV}, {K}, {V}]")
    P = state_pool.shape[0]
    _v.check_tensor("state_pool", state_pool, _v.state_dtypes(lib), (P, HV, V, K) if state_v_first else (P, HV, K, V),
                    dev)
    flags |= _v.state_flag(lib, state_pool.dtype, longest, state_v_first, "state_pool")
    idx = ssm_state_indices
    _v.check_tensor("ssm_state_indices", idx, (_I32, _I64), (N,), dev)
    inter_ptr, longest = check_intermediate(lib, intermediate_states_out, B, T, HV, K, V, state_v_first, longest, dev,
                                            state_pool.dtype)
    dev_index = _v.device_index(lib, dev)
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
            idx.data_ptr(), N, T, H, HV, scale, lb, mode, flags, state_v_first, longest, inter_ptr)
    _remember(key, (dev_index, N, T, H, HV, mode, flags, scale, lb, longest, 1 if state_v_first else 0))
    return o
