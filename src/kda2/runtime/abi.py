"""ctypes mirror of `templates/kda2_abi.h` (ABI version 2), field for field and in the same order.

Change this file only together with the header and `ABI_VERSION`; tests/test_runtime_cpu.py compiles
the header with a C compiler and checks every offset below against `offsetof`.
"""
from __future__ import annotations

import ctypes
import re
import struct
from pathlib import Path

ABI_VERSION = 2

# enum KDA2GateMode
GATE_PRECOMPUTED = 0
GATE_SOFTPLUS = 1
GATE_LOWER_BOUND = 2
GATE_MODE_NAMES = {GATE_PRECOMPUTED: "precomputed", GATE_SOFTPLUS: "softplus", GATE_LOWER_BOUND: "lower_bound"}

# enum KDA2Flags
FLAG_QK_L2NORM = 1 << 0
FLAG_BETA_SIGMOID = 1 << 1
FLAG_NEG_EIGVAL = 1 << 2
FLAG_G_BF16 = 1 << 3
FLAG_BETA_BF16 = 1 << 4
FLAG_HAS_A_LOG = 1 << 5
FLAG_HAS_DT_BIAS = 1 << 6

# enum KDA2Status (negative return codes; positive ones are CUresult / cudaError_t values)
OK = 0
ERR_BUCKET_OVERFLOW = -1
ERR_LAYOUT = -2
ERR_FEATURE = -3
ERR_BAD_INDEX = -4
ERR_SHAPE = -5
ERR_DRIVER = -6
ERR_NO_CONTEXT = -7
ERR_WORKSPACE = -8

STATUS_MESSAGES = {
    ERR_BUCKET_OVERFLOW: "KDA2_ERR_BUCKET_OVERFLOW: max_seqlen above the largest bucket built",
    ERR_LAYOUT: "KDA2_ERR_LAYOUT: state layout not built",
    ERR_FEATURE: "KDA2_ERR_FEATURE: gate mode / flag not compiled into this library",
    ERR_BAD_INDEX: "KDA2_ERR_BAD_INDEX: no variant with that index",
    ERR_SHAPE: "KDA2_ERR_SHAPE: H/HV/N inconsistent",
    ERR_DRIVER: "KDA2_ERR_DRIVER: libcuda.so.1 could not be opened (no NVIDIA driver)",
    ERR_NO_CONTEXT: "KDA2_ERR_NO_CONTEXT: no current CUDA context (initialise CUDA first), or too many",
    ERR_WORKSPACE: "KDA2_ERR_WORKSPACE: workspace NULL or smaller than kda2_workspace_bytes() (chunk libraries)",
}


class KDA2RecurrentArgs(ctypes.Structure):
    """`KDA2RecurrentArgs` of kda2_abi.h. Pointers are raw device addresses (ints); 0 means NULL."""

    _fields_ = [
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("g", ctypes.c_void_p),
        ("beta", ctypes.c_void_p),
        ("A_log", ctypes.c_void_p),
        ("dt_bias", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("h0", ctypes.c_void_p),
        ("ht", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p),
        ("state_indices", ctypes.c_void_p),
        ("N", ctypes.c_int32),
        ("T", ctypes.c_int32),
        ("H", ctypes.c_int32),
        ("HV", ctypes.c_int32),
        ("scale", ctypes.c_float),
        ("lower_bound", ctypes.c_float),
        ("gate_mode", ctypes.c_int32),
        ("flags", ctypes.c_int32),
        ("state_v_first", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        # ABI 2
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_int64),
        ("max_seqlen", ctypes.c_int64),
    ]


#: The same layout as one `struct` format, so the hot path fills a cached args struct with a single
#: `pack_into` instead of 22 ctypes attribute writes (~0.5 µs instead of ~3 µs per call).
#: Order: 12 pointers, N, T, H, HV, scale, lower_bound, gate_mode, flags, state_v_first, reserved,
#: workspace, workspace_bytes, max_seqlen.
ARGS_PACK = struct.Struct("=12Q4i2f4iQqq")
assert ARGS_PACK.size == ctypes.sizeof(KDA2RecurrentArgs), "abi.py: pack format out of sync with struct"

# C signatures of the exported functions: name -> (restype, argtypes).
FUNCTIONS = {
    "kda2_abi_version": (ctypes.c_int, []),
    "kda2_library_json": (ctypes.c_char_p, []),
    "kda2_num_variants": (ctypes.c_int, []),
    "kda2_select": (ctypes.c_int, [ctypes.c_int32, ctypes.c_int64]),
    "kda2_preload": (ctypes.c_int, []),
    # args is passed as an address (int) so the hot path avoids building a ctypes pointer object.
    "kda2_launch": (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]),
    "kda2_fwd": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]),
    "kda2_recurrent_fwd": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]),
    "kda2_workspace_bytes": (ctypes.c_int64, [ctypes.c_void_p]),
}

#: Chunk family constants of kda2_abi.h (kda2_chunk_slot_bytes / kda2_chunk_ids).
CHUNK = 64


def chunk_slot_bytes(K: int, V: int) -> int:
    """kda2_chunk_slot_bytes: one (chunk, value head) slot of the chunk workspace."""
    return 64 * K * 2 * 3 + V * 64 * 2 + 64 * 64 * 2 + K * 4


def chunk_workspace_bytes(N: int, T: int, HV: int, K: int, V: int, varlen: bool) -> int:
    """What kda2_workspace_bytes returns for a chunk library (T: per sequence, or packed total with varlen)."""
    total = T if varlen else N * T
    return (total // CHUNK + N + 1) * HV * chunk_slot_bytes(K, V)


def status_codes() -> dict[int, str]:
    """KDA2Status values -> "NAME: comment", from the header shipped with the package when present.

    The header is the source of truth; reading it means a status code added there (with a new ABI
    build) still gets its own name in error messages. Falls back to the table above.
    """
    global _header_codes
    if _header_codes is None:
        codes = dict(STATUS_MESSAGES)
        try:
            text = (Path(__file__).resolve().parents[1] / "templates" / "kda2_abi.h").read_text()
            for name, value, comment in re.findall(r"(KDA2_ERR_\w+)\s*=\s*(-\d+)\s*,?\s*(?://\s*(.*))?", text):
                codes[int(value)] = f"{name}: {comment.strip()}" if comment else name
        except OSError:
            pass
        _header_codes = codes
    return _header_codes


_header_codes: dict[int, str] | None = None


def describe_rc(rc: int) -> str:
    """Human-readable meaning of a non-zero return code of the C ABI."""
    if rc < 0:
        return status_codes().get(rc, f"unknown KDA2Status {rc}")
    return f"CUDA error {rc} ({_cuda_error_name(rc)})"


def _cuda_error_name(code: int) -> str:
    # Only on the error path. The library calls the driver API, so positive codes are CUresult values
    # (numerically the same as cudaError_t for the common ones); cuda.bindings knows every name.
    try:
        from cuda.bindings import driver as cu

        return cu.CUresult(code).name
    except Exception:  # noqa: BLE001 - any failure here must not mask the original error
        return "CUresult"
