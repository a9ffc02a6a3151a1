"""FLA-compatible `chunk_kda`: KDA prefill on a chunk-family library (chunkwise-parallel tensor-core kernels).

Same validation as `fused_recurrent_kda` (kda2.runtime.validate), plus chunk_kda's own arguments. A chunk
library runs two kernels through a device workspace (kda2/abi.h, kda2_chunk_slot_bytes); the workspace
is cached per (device, stream) and grown on demand, so steady-state calls allocate nothing but their
outputs. Under CUDA graph capture it is allocated per call from the graph's pool instead (a cached
buffer could later be replaced while a graph still points at it).
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any

from kda2.runtime import abi, api
from kda2.runtime import params as _params
from kda2.runtime import validate as _v
from kda2.runtime.library import Library

_PACK = abi.ARGS_PACK.pack_into
_addressof = ctypes.addressof
_MON: Any = None  # the active kda2.runtime.monitor.Monitor, or None (see api._MON)

#: (device index, raw stream) -> uint8 workspace tensor; grown, never shrunk.
_workspaces: dict[tuple[int, int], Any] = {}
_ws_lock = threading.Lock()
_GROWTH = 1.25           # grow by a margin: a slowly rising size must not reallocate every call
_ALIGN = 1 << 21         # and in 2 MiB steps


def workspace_bytes(N: int, T: int, HV: int, K: int, V: int, varlen: bool, split: int = 1) -> int:
    """kda2_workspace_bytes of a chunk library (T per sequence, or the packed total with varlen) launching with
    `split` segments per sequence."""
    return abi.chunk_workspace_bytes(N, T, HV, K, V, varlen, split)


def _workspace(torch: Any, dev: Any, dev_index: int, stream: int, nbytes: int) -> Any:
    if dev.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return torch.empty(nbytes, dtype=torch.uint8, device=dev)
    key = (dev_index, stream)
    ws = _workspaces.get(key)
    if ws is None or ws.numel() < nbytes:
        with _ws_lock:
            ws = _workspaces.get(key)
            if ws is None or ws.numel() < nbytes:
                size = -(-int(nbytes * _GROWTH) // _ALIGN) * _ALIGN
                _workspaces.pop(key, None)  # stream-ordered free: the old buffer's work on this stream comes first
                ws = _workspaces[key] = torch.empty(size, dtype=torch.uint8, device=dev)
    return ws


def release_workspaces() -> None:
    """Drop the cached workspaces (their memory returns to torch's caching allocator)."""
    with _ws_lock:
        _workspaces.clear()


def _check_alignment(tensors) -> None:
    """The chunk kernels move q/k/v/g/o rows in 16-byte pieces (cp.async, vector stores) and states in 8-byte
    pairs: a contiguous view that starts mid-row (a storage offset) would fault on the device, not here."""
    for name, t, n in tensors:
        if t is not None and t.data_ptr() % n:
            raise _v.fail(f"{name} data pointer", f"{t.data_ptr():#x} (storage offset {t.storage_offset()})",
                          f"a {n}-byte aligned address (pass a fresh tensor, e.g. .clone())")


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, safe_gate=False, lower_bound=None, disable_recompute=False,
              return_intermediate_states=False, state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
              cp_context=None, use_graph=False, max_num_seqs=None, *, A_log=None, dt_bias=None,
              library: Library | None = None, max_seqlen: int | None = None, out=None, final_state_out=None,
              split: int | None = None, overlap: bool | None = None, **kwargs):
    """KDA forward in 64-token chunks on tensor cores, drop-in for `fla.ops.kda.chunk_kda` (FLA 0.6) forward.

    Shapes (FLA): q, k [B, T, H, K] and v [B, T, HV, V] in bf16 or fp16 (one of the spec's input_dtypes);
    g [B, T, HV, K] fp32 or q's dtype; beta [B, T, HV] fp32 or q's dtype; A_log [HV], dt_bias [HV*K] fp32 or
    bf16 or fp16 (16-bit ones read from an fp32 copy: kda2.runtime.params); states fp32 [N, HV, K, V]
    ([N, HV, V, K] with state_v_first). Returns (o [B, T, HV, V] in q's dtype, final_state or None).
    Gate (as FLA): use_gate_in_kernel=False takes g as the log decay itself (gate mode `precomputed`); True with
    lower_bound=None is the softplus gate g' = -exp(A_log)·softplus(g + dt_bias) (needs A_log; dt_bias optional);
    True with lower_bound is the bounded gate lower_bound·sigmoid(exp(A_log)·(g + dt_bias)) (x alone without A_log).
    Each needs its mode in the spec's features.gate_modes. scale defaults
    to K ** -0.5. Varlen: q etc. [1, total, ...] with cu_seqlens int32 / int64 [N + 1] on q's device (nothing read
    back). Raises KDA2InputError (a ValueError) naming a wrong argument and what is allowed, before any launch;
    ArtifactError where no built library fits; TypeError for an unknown keyword.

    The positional parameters are FLA's, in FLA's order; `A_log` / `dt_bias` are keywords (FLA takes them from
    **kwargs). FLA's own: `chunk_size` (64 only), `disable_recompute` (ignored: forward only),
    `return_intermediate_states` (False only), `cp_context` (None only), `use_graph` / `max_num_seqs` (FLA's CUDA
    graph of its own launches: ignored, every kda2 call can be captured as it is), `transpose_state_layout`
    (deprecated alias of state_v_first, with FLA's DeprecationWarning). Unknown keywords are a TypeError (FLA
    ignores them). `safe_gate` is checked as in FLA (with use_gate_in_kernel,
    lower_bound must be in [-5, 0)); the kernels are exact for the unbounded gate either way.
    Keyword-only extras as in `fused_recurrent_kda`: `library` (default: the chunk library,
    `kda2.runtime.default_library("chunk")`), `cu_seqlens_cpu` / `max_seqlen` (the longest sequence;
    it sizes the prep kernel's grid, so a smaller promise than the truth leaves chunks uncomputed),
    `out` / `final_state_out`. Any length runs: above the largest seq_len bucket the last bucket's
    variant is used. `split`: segments per sequence of the exact split (docs/DESIGN.md §1; results equal
    the unsplit ones up to rounding); None lets the library choose from the shapes and the GPU.
    `overlap`: run the serial state pass beside the prep (docs/DESIGN.md §1; the same results bit for bit);
    True asks for it wherever the GPU holds both kernels' CTAs together, False refuses it, None lets the
    library choose.
    """
    torch = api._torch or api._init_torch()
    if not _v.forward_only_warned and torch.is_grad_enabled():
        _v.warn_forward_only("chunk_kda", q, k, v, g, beta, A_log, dt_bias, initial_state)
    # FLA's keywords and safe_gate need no library: checked before it is looked up
    state_v_first = _v.chunk_kwargs(kwargs, state_v_first, return_intermediate_states, cp_context, max_num_seqs)
    _v.check_safe_gate(safe_gate, use_gate_in_kernel, lower_bound)
    lib = _v.looked_up(
        lambda: _v.library_arg(library, "chunk") if library is not None else _v.default_for("chunk", q, v),
        q, k, v, g, beta, out, optional=(
        ("A_log", A_log), ("dt_bias", dt_bias), ("initial_state", initial_state), ("final_state_out", final_state_out),
        ("cu_seqlens", cu_seqlens)))
    if use_gate_in_kernel:
        A_log, dt_bias = _params.gate_params(A_log, dt_bias, "chunk")
    (dev, N, B, T, H, HV, K, V, mode, flags, scale, lb, a_ptr, d_ptr, longest) = _v.prepare(
        lib, q, k, v, g, beta, A_log, dt_bias, scale, use_qk_l2norm_in_kernel, use_gate_in_kernel,
        use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, state_v_first, cu_seqlens, cu_seqlens_cpu,
        max_seqlen, out, family="chunk")
    sshape = _v.state_shape(N, HV, K, V, state_v_first)
    if initial_state is not None:
        _v.check_tensor("initial_state", initial_state, (torch.float32,), sshape, dev)
    if final_state_out is not None:
        if not output_final_state:
            raise _v.fail("final_state_out", "a tensor with output_final_state=False", "output_final_state=True")
        _v.check_tensor("final_state_out", final_state_out, (torch.float32,), sshape, dev)
    _check_alignment((("q", q, 16), ("k", k, 16), ("v", v, 16), ("g", g, 16), ("out", out, 16),
                      ("initial_state", initial_state, 8), ("final_state_out", final_state_out, 8)))
    if split is not None and (isinstance(split, bool) or not (isinstance(split, int) and 1 <= split <= abi.MAX_SPLIT)):
        raise _v.fail("split", repr(split), f"None (the library's choice) or an int in [1, {abi.MAX_SPLIT}]")
    if overlap is not None and not isinstance(overlap, bool):
        raise _v.fail("overlap", repr(overlap), "None (the library's choice), True or False")
    if overlap is not None:
        flags |= abi.FLAG_CHUNK_OVERLAP if overlap else abi.FLAG_CHUNK_NO_OVERLAP
    dev_index = _v.device_index(lib, dev)
    # -- validation done: allocate and launch --------------------------------------------------------
    o, ht = api.outputs(torch, v, out, output_final_state, final_state_out, sshape, dev)
    if B * T == 0:
        return o, api.no_tokens(ht, initial_state)
    cu = cu_seqlens
    if cu is not None and cu.dtype is not torch.int64:
        cu = cu.to(torch.int64)  # stream-ordered temporary; the caching allocator keeps it alive long enough
    stream = api._raw_stream(dev_index)
    args = lib.args()
    _PACK(args, 0, q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(), a_ptr, d_ptr,
          o.data_ptr(), 0 if initial_state is None else initial_state.data_ptr(), 0 if ht is None else ht.data_ptr(),
          0 if cu is None else cu.data_ptr(), 0, N, T, H, HV, scale, lb, mode, flags, 1 if state_v_first else 0,
          split or 0, 0, 0, longest, 0)
    # The library sizes the workspace: the split it will choose depends on the GPU (kda2_workspace_bytes).
    nbytes = lib._workspace_bytes(_addressof(args))
    if nbytes < 0:
        raise lib.error(nbytes)
    ws = _workspace(torch, dev, dev_index, stream or 0, nbytes)
    args.workspace, args.workspace_bytes = ws.data_ptr(), ws.numel()
    if _MON:
        _MON.launch("chunk_kda", lib, args, dev_index, longest, stream)
    elif api._multi_gpu or lib._fwd(_addressof(args), longest, stream):
        api._relaunch(lib, args, dev_index, longest)  # another device current, no context yet, or an error
    return o, ht
