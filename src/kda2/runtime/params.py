"""Gate parameters (A_log, dt_bias) as the kernels read them.

FLA takes them in whatever float dtype a model was cast to; the recurrent kernels read fp32 or bf16, the chunk
kernels fp32. The others become fp32 copies here — the one step of a call that allocates and launches before its
checks (kda2.runtime.validate) — made once per parameter while it is unchanged (its version counter and storage),
so a model's steady-state calls, and graph replay, cast nothing. Used by the torch API and the FLA backend.
"""
from __future__ import annotations

import weakref
from typing import Any

_copies: dict[int, tuple] = {}   # id(tensor) -> (weakref, stamp, float32 copy)


def fp32_copy(t: Any) -> Any:
    """`t` as a contiguous float32 tensor: itself if it is one, else a copy cached while `t` is unchanged."""
    if t is None or str(t.dtype) == "torch.float32":
        return t
    try:
        stamp = (t._version, t.data_ptr(), tuple(t.shape), str(t.dtype))
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


def gate_params(A_log: Any, dt_bias: Any, family: str) -> tuple[Any, Any]:
    """A_log / dt_bias with the 16-bit dtypes the family's kernels do not read as fp32 copies (fp32_copy); anything
    else as given, for the checks to name."""
    native = _NATIVE[family]
    return tuple(fp32_copy(t) if str(getattr(t, "dtype", None)) in _CAST and str(t.dtype) not in native else t
                 for t in (A_log, dt_bias))
