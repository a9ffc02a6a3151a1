"""The runtime's view of the C ABI (kda2/abi.h): ctypes struct, pack format, signatures, constants.

Everything is derived from the tables of `kda2.artifact.abi` (the one home of these facts, from which
the header is also generated); no value is written twice and nothing is read from disk. The names
below are the runtime's stable spelling of them (tests/test_abi_facts.py checks every table row has one).
"""
from __future__ import annotations

from kda2.artifact import abi as _facts

ABI_VERSION = _facts.ABI_VERSION

_GATE, _FLAG, _STATUS = _facts.GATE_MODES, _facts.FLAGS, _facts.STATUSES

# enum KDA2GateMode
GATE_PRECOMPUTED = _GATE["precomputed"]
GATE_SOFTPLUS = _GATE["softplus"]
GATE_LOWER_BOUND = _GATE["lower_bound"]
GATE_MODE_NAMES = dict(_facts.GATE_MODE_NAMES)

# enum KDA2Flags
FLAG_QK_L2NORM = _FLAG["QK_L2NORM"]
FLAG_BETA_SIGMOID = _FLAG["BETA_SIGMOID"]
FLAG_NEG_EIGVAL = _FLAG["NEG_EIGVAL"]
FLAG_G_BF16 = _FLAG["G_BF16"]
FLAG_BETA_BF16 = _FLAG["BETA_BF16"]
FLAG_HAS_A_LOG = _FLAG["HAS_A_LOG"]
FLAG_HAS_DT_BIAS = _FLAG["HAS_DT_BIAS"]
FLAG_A_LOG_BF16 = _FLAG["A_LOG_BF16"]
FLAG_DT_BIAS_BF16 = _FLAG["DT_BIAS_BF16"]
FLAG_INPUT_FP16 = _FLAG["INPUT_FP16"]
FLAG_STATE_BF16 = _FLAG["STATE_BF16"]
FLAG_CHUNK_OVERLAP = _FLAG["CHUNK_OVERLAP"]
FLAG_CHUNK_NO_OVERLAP = _FLAG["CHUNK_NO_OVERLAP"]

# enum KDA2Status (negative return codes; positive ones are CUresult values of the driver API)
OK = _STATUS["OK"]
ERR_BUCKET_OVERFLOW = _STATUS["ERR_BUCKET_OVERFLOW"]
ERR_LAYOUT = _STATUS["ERR_LAYOUT"]
ERR_FEATURE = _STATUS["ERR_FEATURE"]
ERR_BAD_INDEX = _STATUS["ERR_BAD_INDEX"]
ERR_SHAPE = _STATUS["ERR_SHAPE"]
ERR_DRIVER = _STATUS["ERR_DRIVER"]
ERR_NO_CONTEXT = _STATUS["ERR_NO_CONTEXT"]
ERR_WORKSPACE = _STATUS["ERR_WORKSPACE"]
ERR_DTYPE = _STATUS["ERR_DTYPE"]

#: Negative status -> "KDA2_ERR_NAME: meaning".
STATUS_MESSAGES = dict(_facts.STATUS_MESSAGES)

#: `KDA2RecurrentArgs` (ctypes.Structure). Pointers are raw device addresses (ints); 0 means NULL.
KDA2RecurrentArgs = _facts.KDA2RecurrentArgs

#: The same layout as one `struct.Struct`, so the hot path fills a cached args struct with a single
#: `pack_into` instead of ~25 ctypes attribute writes (~0.5 µs instead of ~3 µs per call).
ARGS_PACK = _facts.ARGS_PACK

#: C signatures of the exported functions: name -> (restype, argtypes). Every args pointer is a
#: c_void_p (an address, int), so the hot path builds no ctypes pointer object.
FUNCTIONS = _facts.ctypes_signatures()

#: Tokens per chunk of the chunk family (KDA2_CHUNK).
CHUNK = _facts.CHUNK
chunk_slot_bytes = _facts.chunk_slot_bytes
chunk_workspace_bytes = _facts.chunk_workspace_bytes
ready_bytes = _facts.ready_bytes
MAX_SPLIT = _facts.MAX_SPLIT


def status_codes() -> dict[int, str]:
    """KDA2Status values < 0 -> "NAME: meaning" (from the ABI tables)."""
    return STATUS_MESSAGES


def describe_rc(rc: int) -> str:
    """Human-readable meaning of a non-zero return code of the C ABI."""
    if rc < 0:
        return STATUS_MESSAGES.get(rc, f"unknown KDA2Status {rc}")
    return f"CUDA error {rc} ({_cuda_error_name(rc)})"


def _cuda_error_name(code: int) -> str:
    # Only on the error path. The library calls the driver API, so positive codes are CUresult values
    # (numerically the same as cudaError_t for the common ones); cuda.bindings knows every name.
    try:
        from cuda.bindings import driver as cu

        return cu.CUresult(code).name
    except Exception:  # noqa: BLE001 - any failure here must not mask the original error
        return "CUresult"
