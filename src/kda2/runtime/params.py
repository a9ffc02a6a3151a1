"""Gate parameters (A_log, dt_bias) as the kernels read them.

FLA takes them in whatever float dtype a model was cast to, and in any layout; the recurrent kernels read fp32 or
bf16, the chunk kernels fp32, both contiguous. The others (and a strided view in any of the three dtypes) become
contiguous fp32 copies here — the one step of a call that allocates and launches before its
checks (kda2.runtime.validate) — made once per parameter while it is unchanged (its version counter and storage),
so a model's steady-state calls, and graph replay, cast nothing. Used by the torch API and the FLA backend.
"""
from __future__ import annotations

import weakref
from typing import Any

_copies: dict[int, tuple] = {}   # id(tensor) -> (weakref, stamp, float32 copy)


def fp32_copy(t: Any) -> Any:
    """`t` as a contiguous float32 tensor: itself if it is one, else a copy cached while `t` is unchanged."""
    if t is None or (str(t.dtype) == "torch.float32" and t.is_contiguous()):
        return t
    try:
        stamp = (t._version, t.data_ptr(), tuple(t.shape), t.stride(), str(t.dtype))
    except (AttributeError, RuntimeError):  # inference tensors track no version: convert every time
        return t.detach().float().contiguous()
    key = id(t)
    hit = _copies.get(key)
    if hit is not None and hit[0]() is t and hit[1] == stamp:
        return hit[2]
    if len(_copies) > 4096:
        _copies.clear()
    copy = t.detach().float().contiguous()
    _copies[key] = (weakref.ref(t, lambda _, key=key: _copies.pop(key, None)), stamp, copy)
    return copy


#: the gate-parameter dtypes the API takes, as its refusals name them
TAKEN = "float32, bfloat16 or float16"
_NATIVE = {"recurrent": ("torch.float32", "torch.bfloat16"), "chunk": ("torch.float32",)}
_CAST = ("torch.bfloat16", "torch.float16")
_ALL = ("torch.float32",) + _CAST


def _needs_copy(t: Any, native: tuple[str, ...]) -> bool:
    dtype = getattr(t, "dtype", None)
    if dtype is None:
        return False                    # None, or not a tensor: the checks name it
    dtype = str(dtype)
    if dtype not in _ALL:
        return False                    # not a gate-parameter dtype: the checks name it
    return dtype not in native or not t.is_contiguous()


def gate_params(A_log: Any, dt_bias: Any, family: str) -> tuple[Any, Any]:
    """A_log / dt_bias as the family's kernels read them: a dtype they do not read, or a strided view, as an fp32
    copy (fp32_copy); anything else as given, for the checks to name. Every call of a gated kernel goes through here
    (≈ 0.5 µs when nothing is copied)."""
    native = _NATIVE[family]
    if _needs_copy(A_log, native):
        A_log = fp32_copy(A_log)
    if _needs_copy(dt_bias, native):
        dt_bias = fp32_copy(dt_bias)
    return A_log, dt_bias
