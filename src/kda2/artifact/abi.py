"""The KDA² C ABI, stated once: every fact here, and everything else derives from it.

The C header `kda2/codegen/include/kda2/abi.h` is rendered from these tables by `header_text()` and
committed (kernels and the host library include it as "kda2/abi.h"); the runtime's ctypes mirror
(`kda2.runtime.abi`) is built from the same tables at import time. Nothing here reads a file.

    python -m kda2.artifact.abi --write     # regenerate the header after editing a table below
    python -m kda2.artifact.abi --check     # exit 1 if the committed header differs (tests run this too)

Change a table only together with `ABI_VERSION` (and `ABI_HISTORY`): a field, enum value or signature
that moves breaks every library already built. Standard library only (ctypes included), so a
deployment that has only the runtime can import it.
"""
from __future__ import annotations

import ctypes
import struct
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

# ---- version ------------------------------------------------------------------------------------

ABI_VERSION = 5

#: What each version changed, oldest first (rendered into the header's preamble).
ABI_HISTORY: tuple[tuple[int, str], ...] = (
    (1, "KDA2RecurrentArgs up to `reserved`; the recurrent family only."),
    (2, "KDA2RecurrentArgs gains workspace, workspace_bytes and max_seqlen (appended); kda2_fwd, "
        "kda2_workspace_bytes and KDA2_ERR_WORKSPACE; the library JSON names its family."),
    (3, "Flags KDA2_A_LOG_BF16, KDA2_DT_BIAS_BF16 (gate parameters in bf16), KDA2_INPUT_FP16 (q/k/v/o, and g "
        "or beta when 16-bit, in fp16) and KDA2_STATE_BF16 (h0/ht/intermediate in bf16); KDA2_ERR_DTYPE; "
        "KDA2RecurrentArgs gains `intermediate` (per-token states, appended); "
        "varlen max_seqlen may be an upper bound (the token count); HV / H is any integer ratio; `reserved` becomes "
        "`split` (chunk libraries: segments per sequence, 0 = the library's choice) and the chunk workspace gains "
        "the split region after the slots."),
    (4, "Batch classes: a dispatch table has one row per (layout, bucket, class), a class serving calls of at "
        "least `min_chains` state chains (N * HV); kda2_select takes `chains`; kda2_route names the row it picks."),
    (5, "Flags KDA2_CHUNK_OVERLAP / KDA2_CHUNK_NO_OVERLAP (chunk libraries: the state pass beside the prep, asked "
        "for or refused; neither: the library's choice) and the chunk workspace's ready region after the split "
        "region (a work counter and one ready flag per slot)."),
)


# ---- enums ---------------------------------------------------------------------------------------

class GateMode(NamedTuple):
    name: str      # as specs and the runtime spell it; C: KDA2_GATE_<NAME>
    value: int
    comment: str

    @property
    def c_name(self) -> str:
        return f"KDA2_GATE_{self.name.upper()}"


class Flag(NamedTuple):
    name: str      # C: KDA2_<NAME>; Python: FLAG_<NAME>
    bit: int
    comment: str

    @property
    def c_name(self) -> str:
        return f"KDA2_{self.name}"

    @property
    def value(self) -> int:
        return 1 << self.bit


class Status(NamedTuple):
    name: str      # C: KDA2_<NAME>; Python: <NAME>
    value: int
    comment: str

    @property
    def c_name(self) -> str:
        return f"KDA2_{self.name}"


#: enum KDA2GateMode: the gate activation applied to `g` inside the kernel (docs/DESIGN.md §1).
GATE_MODE_TABLE: tuple[GateMode, ...] = (
    GateMode("precomputed", 0, "g is the log decay already (g <= 0)"),
    GateMode("softplus", 1, "g = -exp(A_log[hv]) * softplus(g + dt_bias[hv*K+k])"),
    GateMode("lower_bound", 2, "g = lower_bound * sigmoid(exp(A_log[hv]) * (g + dt_bias[hv*K+k]))"),
)

#: enum KDA2Flags: bits of KDA2RecurrentArgs::flags.
FLAG_TABLE: tuple[Flag, ...] = (
    Flag("QK_L2NORM", 0, "q, k <- x / sqrt(sum x^2 + 1e-6)"),
    Flag("BETA_SIGMOID", 1, "beta <- sigmoid(beta)"),
    Flag("NEG_EIGVAL", 2, "beta <- 2 * sigmoid(beta) (needs KDA2_BETA_SIGMOID)"),
    Flag("G_BF16", 3, "g is 16-bit, in the input dtype (bf16, or fp16 with KDA2_INPUT_FP16); else fp32"),
    Flag("BETA_BF16", 4, "beta is 16-bit, in the input dtype (bf16, or fp16 with KDA2_INPUT_FP16); else fp32"),
    Flag("HAS_A_LOG", 5, "A_log given (lower_bound mode may omit it)"),
    Flag("HAS_DT_BIAS", 6, "dt_bias given"),
    Flag("A_LOG_BF16", 7, "A_log is bf16 (else fp32); read as fp32 (recurrent libraries)"),
    Flag("DT_BIAS_BF16", 8, "dt_bias is bf16 (else fp32); read as fp32 (recurrent libraries)"),
    Flag("INPUT_FP16", 9, "q, k, v and o are fp16 (else bf16); recurrent libraries built with fp16"),
    Flag("STATE_BF16", 10, "h0, ht and intermediate are bf16 (else fp32); recurrent decode kernels built with them"),
    Flag("CHUNK_OVERLAP", 11, "chunk: the state pass beside the prep (docs/DESIGN.md §1 overlap), where the GPU holds both"),
    Flag("CHUNK_NO_OVERLAP", 12, "chunk: never overlap the state pass with the prep"),
)

#: enum KDA2Status: 0 or a negative code; positive return values are CUresult codes of the driver API.
STATUS_TABLE: tuple[Status, ...] = (
    Status("OK", 0, ""),
    Status("ERR_BUCKET_OVERFLOW", -1, "max_seqlen above the largest bucket built (recurrent libraries)"),
    Status("ERR_LAYOUT", -2, "state layout not built"),
    Status("ERR_FEATURE", -3, "gate mode / flag not compiled into this library"),
    Status("ERR_BAD_INDEX", -4, "no variant with that index"),
    Status("ERR_SHAPE", -5, "H/HV/N/T/max_seqlen inconsistent"),
    Status("ERR_DRIVER", -6, "libcuda.so.1 could not be opened (no NVIDIA driver)"),
    Status("ERR_NO_CONTEXT", -7, "no current CUDA context (initialise CUDA first), or too many"),
    Status("ERR_WORKSPACE", -8, "workspace NULL or smaller than kda2_workspace_bytes() (chunk libraries)"),
    Status("ERR_DTYPE", -9, "input dtype (KDA2_INPUT_FP16) or gate parameter dtype not built into this library"),
)

#: Gate mode name -> KDA2GateMode value (specs, codegen's gate masks, the tuner).
GATE_MODES: dict[str, int] = {m.name: m.value for m in GATE_MODE_TABLE}
#: KDA2GateMode value -> name (the runtime's error messages).
GATE_MODE_NAMES: dict[int, str] = {m.value: m.name for m in GATE_MODE_TABLE}
#: Flag name (e.g. "QK_L2NORM") -> mask.
FLAGS: dict[str, int] = {f.name: f.value for f in FLAG_TABLE}
#: Status name (e.g. "ERR_SHAPE") -> value.
STATUSES: dict[str, int] = {s.name: s.value for s in STATUS_TABLE}
#: Negative status value -> "KDA2_ERR_...: comment" (error messages).
STATUS_MESSAGES: dict[int, str] = {s.value: f"{s.c_name}: {s.comment}" for s in STATUS_TABLE if s.value < 0}


# ---- KDA2RecurrentArgs ---------------------------------------------------------------------------

class Field(NamedTuple):
    name: str
    ctype: str     # C type as declared in the header (a key of C_SCALARS, or any pointer)
    comment: str
    since: int     # ABI version that added the field (fields are only ever appended)


#: struct KDA2RecurrentArgs, in declaration order. Kernels take it by value; ctypes mirrors it.
ARGS_FIELDS: tuple[Field, ...] = (
    Field("q", "const void*", "[B*T or total, H, K]   bf16 (fp16 with KDA2_INPUT_FP16)", 1),
    Field("k", "const void*", "[B*T or total, H, K]   bf16 (fp16 with KDA2_INPUT_FP16)", 1),
    Field("v", "const void*", "[B*T or total, HV, V]  bf16 (fp16 with KDA2_INPUT_FP16)", 1),
    Field("g", "const void*", "[B*T or total, HV, K]  fp32 or bf16 (KDA2_G_BF16)", 1),
    Field("beta", "const void*", "[B*T or total, HV]     fp32 or bf16 (KDA2_BETA_BF16)", 1),
    Field("A_log", "const float*", "[HV] or NULL; fp32, or bf16 with KDA2_A_LOG_BF16", 1),
    Field("dt_bias", "const float*", "[HV*K] or NULL; fp32, or bf16 with KDA2_DT_BIAS_BF16", 1),
    Field("o", "void*", "[B*T or total, HV, V]  input dtype, fully written", 1),
    Field("h0", "const float*", "initial states [*, HV, K, V] (or [*, HV, V, K]) fp32 (bf16 with KDA2_STATE_BF16), "
          "or NULL (zeros)", 1),
    Field("ht", "float*", "final states, same layout, or NULL; may equal h0 (in place)", 1),
    Field("cu_seqlens", "const int64_t*", "[N+1] or NULL (dense: sequence n is tokens n*T .. n*T+T-1)", 1),
    Field("state_indices", "const int32_t*", "[N] rows of h0/ht per sequence, or NULL (row n); < 0: skip", 1),
    Field("N", "int32_t", "sequences", 1),
    Field("T", "int32_t", "tokens per sequence (dense); with cu_seqlens: total packed tokens", 1),
    Field("H", "int32_t", "q/k heads", 1),
    Field("HV", "int32_t", "value heads, HV % H == 0 (any ratio; value head hv reads q/k head hv / (HV/H))", 1),
    Field("scale", "float", "", 1),
    Field("lower_bound", "float", "", 1),
    Field("gate_mode", "int32_t", "KDA2GateMode", 1),
    Field("flags", "int32_t", "KDA2Flags", 1),
    Field("state_v_first", "int32_t", "0: states [K, V]; 1: states [V, K]", 1),
    Field("split", "int32_t", "chunk: segments per sequence (docs/DESIGN.md §1 exact split); 0: library's choice", 1),
    Field("workspace", "void*", "chunk libraries: device scratch of >= kda2_workspace_bytes() bytes; else NULL", 2),
    Field("workspace_bytes", "int64_t", "size of workspace", 2),
    Field("max_seqlen", "int64_t", "longest sequence, or an upper bound (varlen: the token count); kda2_fwd "
          "fills it in (chunk dense: <= 0 means T)", 2),
    Field("intermediate", "float*", "recurrent: NULL, or the state after every token [B*T or total, HV, K, V] "
          "(state layout and dtype)", 3),
)

#: Non-pointer C types the ABI uses: C type -> (ctypes type, `struct` code, size = alignment in bytes).
C_SCALARS: dict[str, tuple[type, str, int]] = {
    "int": (ctypes.c_int, "i", 4),
    "int32_t": (ctypes.c_int32, "i", 4),
    "int64_t": (ctypes.c_int64, "q", 8),
    "float": (ctypes.c_float, "f", 4),
}
#: Every pointer: 8 bytes on the 64-bit hosts KDA² targets; ctypes sees a raw address (int, 0 = NULL).
POINTER: tuple[type, str, int] = (ctypes.c_void_p, "Q", 8)


def _is_pointer(ctype: str) -> bool:
    return ctype.rstrip().endswith("*")


def _scalar(ctype: str) -> tuple[type, str, int]:
    if _is_pointer(ctype):
        return POINTER
    try:
        return C_SCALARS[ctype]
    except KeyError:
        raise ValueError(f"kda2.artifact.abi: C type {ctype!r} has no ctypes / struct mapping") from None


def args_layout() -> tuple[dict[str, int], int]:
    """(field -> byte offset, sizeof) of KDA2RecurrentArgs under natural alignment (the C rule on x86-64
    and aarch64 Linux). The test suite checks this against `offsetof` of the compiled header."""
    offsets, pos, align = {}, 0, 1
    for f in ARGS_FIELDS:
        size = _scalar(f.ctype)[2]
        pos = -(-pos // size) * size
        offsets[f.name] = pos
        pos += size
        align = max(align, size)
    return offsets, -(-pos // align) * align


def args_pack_format() -> str:
    """The `struct` format of KDA2RecurrentArgs ("=", explicit padding bytes, runs merged): "=12Q4i2f4iQ2qQ"."""
    offsets, size = args_layout()
    codes, pos = [], 0
    for f in ARGS_FIELDS:
        codes += ["x"] * (offsets[f.name] - pos)
        code, width = _scalar(f.ctype)[1:]
        codes.append(code)
        pos = offsets[f.name] + width
    codes += ["x"] * (size - pos)
    out, i = "=", 0
    while i < len(codes):
        j = i
        while j < len(codes) and codes[j] == codes[i]:
            j += 1
        out += (str(j - i) if j - i > 1 else "") + codes[i]
        i = j
    return out


class KDA2RecurrentArgs(ctypes.Structure):
    """`KDA2RecurrentArgs` of kda2/abi.h. Pointers are raw device addresses (ints); 0 means NULL."""

    _fields_ = [(f.name, _scalar(f.ctype)[0]) for f in ARGS_FIELDS]


#: The same layout as one `struct` format, so a hot path can fill a cached args struct with a single
#: `pack_into` instead of ~25 ctypes attribute writes (~0.5 µs instead of ~3 µs per call).
ARGS_PACK = struct.Struct(args_pack_format())
if ARGS_PACK.size != ctypes.sizeof(KDA2RecurrentArgs):  # pragma: no cover - a platform with odd alignment
    raise ImportError(f"kda2.artifact.abi: pack format {ARGS_PACK.format} ({ARGS_PACK.size} B) disagrees with "
                      f"ctypes ({ctypes.sizeof(KDA2RecurrentArgs)} B)")


# ---- exported functions --------------------------------------------------------------------------

class Function(NamedTuple):
    name: str
    ret: str                                # C return type
    params: tuple[tuple[str, str], ...]     # (C type, parameter name); () is (void)
    comment: str

    def prototype(self) -> str:
        params = ", ".join(f"{t} {n}" for t, n in self.params) or "void"
        return f"{self.ret} {self.name}({params});"


#: extern "C" entry points of every lib<spec>.<arch>.so, in header order.
FUNCTIONS_TABLE: tuple[Function, ...] = (
    Function("kda2_abi_version", "int", (), "KDA2_ABI_VERSION the library was built with."),
    Function("kda2_library_json", "const char*", (),
             'NUL-terminated JSON: {"abi_version", "spec", "arch", "family", "k", "v", "variants", "dispatch"}.'),
    Function("kda2_num_variants", "int", (), "Number of variants (indices 0 .. n-1 of kda2_launch)."),
    Function("kda2_route", "int", (("int32_t", "state_v_first"), ("int64_t", "max_seqlen"), ("int64_t", "chains")),
             "Row of the dispatch table (as listed in kda2_library_json) for (layout, max_seqlen, chains = N * HV): "
             "the smallest bucket >= max_seqlen, then the row of that bucket with the largest min_chains <= "
             "chains; or a KDA2Status < 0. Chunk libraries route a max_seqlen above the largest bucket to the "
             "last bucket."),
    Function("kda2_select", "int", (("int32_t", "state_v_first"), ("int64_t", "max_seqlen"), ("int64_t", "chains")),
             "Index of the variant kda2_route's row calls, or a KDA2Status < 0."),
    Function("kda2_workspace_bytes", "int64_t", (("const KDA2RecurrentArgs*", "args"),),
             "Workspace bytes a launch with these args needs (N, T, HV, cu_seqlens are read): 0 for recurrent "
             "libraries, kda2_chunk_ids(a) * HV * kda2_chunk_slot_bytes(K, V) plus the split region of the split "
             "the library will launch with (args->split, or when 0 its choice under the library-wide bound, which a "
             "dispatch row's bound never exceeds) and the ready region for chunk ones; < 0: a KDA2Status."),
    Function("kda2_preload", "int", (),
             "Load every variant's cubin into the current context (call before CUDA graph capture)."),
    Function("kda2_launch", "int", (("int", "index"), ("const KDA2RecurrentArgs*", "args"), ("void*", "stream")),
             "Launch variant `index` (as listed in kda2_library_json) on `stream` (args->max_seqlen as given)."),
    Function("kda2_fwd", "int",
             (("const KDA2RecurrentArgs*", "args"), ("int64_t", "max_seqlen"), ("void*", "stream")),
             "kda2_select (chains = args->N * args->HV) + kda2_launch, with args->max_seqlen set to max_seqlen; chunk "
             "libraries: the library's own split choice (args->split 0) at most the routed row's max_split."),
    Function("kda2_recurrent_fwd", "int",
             (("const KDA2RecurrentArgs*", "args"), ("int64_t", "max_seqlen"), ("void*", "stream")),
             "The ABI 1 name of kda2_fwd."),
)


def _ctypes_of(ctype: str, *, ret: bool = False) -> type:
    if ret and ctype == "const char*":
        return ctypes.c_char_p  # a C string the library owns
    # Every other pointer (args included) is an address (int): the hot path builds no ctypes pointer object.
    return _scalar(ctype)[0]


def ctypes_signatures() -> dict[str, tuple[type, list[type]]]:
    """name -> (restype, argtypes) of every exported function."""
    return {f.name: (_ctypes_of(f.ret, ret=True), [_ctypes_of(t) for t, _ in f.params]) for f in FUNCTIONS_TABLE}


# ---- chunk family workspace ----------------------------------------------------------------------

#: Tokens per chunk of the chunk family (kernels' BT, the prep grid, the workspace's chunk ids).
CHUNK = 64


class SlotPiece(NamedTuple):
    name: str                 # C: KDA2_CHUNK_OFF_<NAME>(K, V) is its byte offset in the slot
    dims: tuple[str, ...]     # each "CHUNK", "K" or "V"
    elem_bytes: int
    comment: str


#: One workspace slot per (chunk id, value head): these pieces back to back, in this order.
CHUNK_SLOT: tuple[SlotPiece, ...] = (
    SlotPiece("W", ("CHUNK", "K"), 2, "w [64][K] bf16"),
    SlotPiece("QG", ("CHUNK", "K"), 2, "qg [64][K] bf16"),
    SlotPiece("KG", ("CHUNK", "K"), 2, "kg [64][K] bf16"),
    SlotPiece("UT", ("V", "CHUNK"), 2, "u^T [V][64] bf16"),
    SlotPiece("AQK", ("CHUNK", "CHUNK"), 2, "masked Aqk [64][64] bf16"),
    SlotPiece("GLAST", ("K",), 4, "last gate row [K] fp32"),
)


def _piece_bytes(p: SlotPiece, K: int, V: int) -> int:
    n = p.elem_bytes
    for d in p.dims:
        n *= {"CHUNK": CHUNK, "K": K, "V": V}[d]
    return n


def chunk_slot_offsets(K: int, V: int) -> dict[str, int]:
    """Piece name -> byte offset in a slot (KDA2_CHUNK_OFF_<NAME>(K, V))."""
    out, pos = {}, 0
    for p in CHUNK_SLOT:
        out[p.name] = pos
        pos += _piece_bytes(p, K, V)
    return out


def chunk_slot_bytes(K: int, V: int) -> int:
    """kda2_chunk_slot_bytes: one (chunk, value head) slot of the chunk workspace."""
    return sum(_piece_bytes(p, K, V) for p in CHUNK_SLOT)


def chunk_ids(N: int, total: int) -> int:
    """kda2_chunk_ids: enough for every sequence's chunks, partial last chunks included."""
    return total // CHUNK + N + 1


#: Most segments one sequence is split into (the split region and the grids are sized by it).
MAX_SPLIT = 64


def split_bytes(N: int, split: int, HV: int, K: int, V: int) -> int:
    """The split region after the slots (docs/DESIGN.md §1 exact split), split > 1: per (sequence, segment,
    value head) the segment's transition [M | B] as fp32 [K][K + V] (key-first), then per (sequence, segment,
    value head) the segment's start state fp32 [K][V]. Nothing when split <= 1."""
    if split <= 1:
        return 0
    return N * split * HV * K * (K + V) * 4 + N * split * HV * K * V * 4


#: The ready region's head: the overlapped prep's work counter (int32), padded to 16 bytes.
READY_HEAD_BYTES = 16


def ready_bytes(N: int, total: int, HV: int) -> int:
    """The ready region after the split region (docs/DESIGN.md §1 overlap): the prep's work counter, then one
    int32 ready flag per slot (chunk id, value head), zeroed by the library before each overlapped launch."""
    return READY_HEAD_BYTES + (chunk_ids(N, total) * HV * 4 + 15) // 16 * 16


def chunk_workspace_bytes(N: int, T: int, HV: int, K: int, V: int, varlen: bool, split: int = 1) -> int:
    """What kda2_workspace_bytes returns for a chunk library (T: per sequence, or packed total with varlen)
    that launches with `split` segments per sequence."""
    total = T if varlen else N * T
    return (chunk_ids(N, total) * HV * chunk_slot_bytes(K, V) + split_bytes(N, split, HV, K, V)
            + ready_bytes(N, total, HV))


# ---- the C header --------------------------------------------------------------------------------

#: Where the rendered header is committed (include path `src/kda2/codegen/include`, as "kda2/abi.h").
HEADER_PATH = Path(__file__).resolve().parents[1] / "codegen" / "include" / "kda2" / "abi.h"
_WIDTH = 110


def _comment_lines(text: str, indent: str = "") -> list[str]:
    return [f"{indent}// {line}" for line in textwrap.wrap(text, _WIDTH - len(indent) - 3)] if text else []


def _aligned(rows: list[tuple[str, str | None]], indent: str = "  ") -> list[str]:
    """Declarations with their `// comment`s in one column; a row (text, None) is a line of its own."""
    col = max(len(code) for code, c in rows if c is not None) + 2
    return [f"{indent}{code}" if c is None else f"{indent}{code:<{col}}// {c}" if c else f"{indent}{code}"
            for code, c in rows]


def _c_dim(d: str) -> str:
    return {"CHUNK": "KDA2_CHUNK", "K": "(int64_t)(K)", "V": "(int64_t)(V)"}[d]


def _c_piece_bytes(p: SlotPiece) -> str:
    dims = [_c_dim(d) for d in p.dims]
    if not any(d.startswith("(int64_t)") for d in dims):
        dims[0] = f"(int64_t){dims[0]}"
    return " * ".join(dims + [str(p.elem_bytes)])


def header_text() -> str:
    """The full text of kda2/abi.h."""
    L: list[str] = [
        "// GENERATED from kda2/artifact/abi.py -- do not edit; edit the tables there, then regenerate with",
        "//   PYTHONPATH=src python -m kda2.artifact.abi --write",
        "// (tests/test_abi_facts.py fails while this file and the tables disagree).",
        "//",
        f"// KDA² C ABI, version {ABI_VERSION}. Shared by every lib<spec>.<arch>.so (families recurrent and",
        "// chunk) and by the kernels, which take KDA2RecurrentArgs by value; kda2.runtime.abi mirrors it with",
        "// ctypes, built from the same tables. Change a field only together with KDA2_ABI_VERSION.",
    ]
    for version, what in ABI_HISTORY:
        L += ["//"] + _comment_lines(f"Version {version}: {what}")
    L += ["#pragma once", "#include <stdint.h>", "", f"#define KDA2_ABI_VERSION {ABI_VERSION}", ""]

    L += ["// Gate activation applied to `g` inside the kernel (docs/DESIGN.md §1).", "enum KDA2GateMode {"]
    L += _aligned([(f"{m.c_name} = {m.value},", m.comment) for m in GATE_MODE_TABLE]) + ["};", ""]
    L += ["// Bits of KDA2RecurrentArgs::flags.", "enum KDA2Flags {"]
    L += _aligned([(f"{f.c_name} = 1 << {f.bit},", f.comment) for f in FLAG_TABLE]) + ["};", ""]
    L += ["// Negative return codes; positive ones are CUresult values of the CUDA driver API.", "enum KDA2Status {"]
    L += _aligned([(f"{s.c_name} = {s.value},", s.comment) for s in STATUS_TABLE]) + ["};", ""]

    L += ["typedef struct KDA2RecurrentArgs {"]
    rows: list[tuple[str, str | None]] = []
    for i, f in enumerate(ARGS_FIELDS):
        if i and f.since != ARGS_FIELDS[i - 1].since:
            rows.append((f"// ---- ABI {f.since} ----", None))
        rows.append((f"{f.ctype} {f.name};", f.comment))
    L += _aligned(rows) + ["} KDA2RecurrentArgs;", ""]

    L += [
        "// Host and device (the chunk kernels index the workspace with the same helpers as the library).",
        "#if defined(__CUDACC__)",
        "#define KDA2_HD __host__ __device__",
        "#else",
        "#define KDA2_HD",
        "#endif",
        "",
        "// ---- chunk family workspace ----",
        "// Tokens per chunk (the kernels' BT).",
        f"#define KDA2_CHUNK {CHUNK}",
    ]
    L += _comment_lines("Workspace: one slot per (chunk id, value head), holding back to back: "
                        + "; ".join(f"{p.comment} at KDA2_CHUNK_OFF_{p.name}" for p in CHUNK_SLOT)
                        + ". Byte offsets for key / value dims (K, V); constant expressions in C and C++.")
    prev = ""
    for i, p in enumerate(CHUNK_SLOT):
        off = "((int64_t)0)" if i == 0 else f"(KDA2_CHUNK_OFF_{CHUNK_SLOT[i - 1].name}(K, V) + {prev})"
        L.append(f"#define KDA2_CHUNK_OFF_{p.name}(K, V) {off}")
        prev = _c_piece_bytes(p)
    L += [
        f"#define KDA2_CHUNK_SLOT_BYTES(K, V) (KDA2_CHUNK_OFF_{CHUNK_SLOT[-1].name}(K, V) + {prev})",
        "// Chunk ids: enough for every sequence's chunks, partial last chunks included.",
        "#define KDA2_CHUNK_IDS(total, N) ((total) / KDA2_CHUNK + (N) + 1)",
        "",
        "static inline KDA2_HD int64_t kda2_chunk_slot_bytes(int K, int V) {",
        "  return KDA2_CHUNK_SLOT_BYTES(K, V);",
        "}",
        "// Chunk ids of a launch: total/64 + N + 1 (total: packed tokens with cu_seqlens, else N*T).",
        "static inline KDA2_HD int64_t kda2_chunk_ids(const KDA2RecurrentArgs* a) {",
        "  int64_t total = a->cu_seqlens ? a->T : (int64_t)a->N * a->T;",
        "  return KDA2_CHUNK_IDS(total, (int64_t)a->N);",
        "}",
        f"// Most segments per sequence (a->split).",
        f"#define KDA2_MAX_SPLIT {MAX_SPLIT}",
        "// Split region (a->split > 1), after the slots: transitions [M | B] fp32 [K][K+V] per (sequence,",
        "// segment, value head), then start states fp32 [K][V] per (sequence, segment, value head).",
        "static inline KDA2_HD int64_t kda2_split_trans_offset(const KDA2RecurrentArgs* a, int K, int V) {",
        "  return kda2_chunk_ids(a) * a->HV * kda2_chunk_slot_bytes(K, V);",
        "}",
        "static inline KDA2_HD int64_t kda2_split_start_offset(const KDA2RecurrentArgs* a, int K, int V) {",
        "  return kda2_split_trans_offset(a, K, V) + (int64_t)a->N * a->split * a->HV * K * (K + V) * 4;",
        "}",
        "static inline KDA2_HD int64_t kda2_split_bytes(const KDA2RecurrentArgs* a, int K, int V) {",
        "  if (a->split <= 1) return 0;",
        "  return (int64_t)a->N * a->split * a->HV * K * (int64_t)(K + V) * 4 + (int64_t)a->N * a->split * a->HV * K * V * 4;",
        "}",
        "// Ready region, after the split region: the overlapped prep's work counter (int32) in a head of",
        "// KDA2_READY_HEAD_BYTES, then one int32 ready flag per slot (index (chunk id) * HV + value head).",
        f"#define KDA2_READY_HEAD_BYTES {READY_HEAD_BYTES}",
        "static inline KDA2_HD int64_t kda2_ready_offset(const KDA2RecurrentArgs* a, int K, int V) {",
        "  return kda2_split_trans_offset(a, K, V) + kda2_split_bytes(a, K, V);",
        "}",
        "static inline KDA2_HD int64_t kda2_ready_bytes(const KDA2RecurrentArgs* a) {",
        "  return KDA2_READY_HEAD_BYTES + (kda2_chunk_ids(a) * a->HV * 4 + 15) / 16 * 16;",
        "}",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
    ]
    for fn in FUNCTIONS_TABLE:
        L += _comment_lines(fn.comment) + [fn.prototype()]
    L += ["#ifdef __cplusplus", "}", "#endif"]
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m kda2.artifact.abi", description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="(re)write the header from the tables")
    mode.add_argument("--check", action="store_true", help="exit 1 if the header differs from the tables")
    mode.add_argument("--print", action="store_true", help="print the header to stdout")
    ap.add_argument("--header", type=Path, default=HEADER_PATH, help=f"header path (default {HEADER_PATH})")
    args = ap.parse_args(argv)
    text = header_text()
    if args.print:
        sys.stdout.write(text)
        return 0
    if args.write:
        from kda2.artifact.atomic import write_text

        write_text(args.header, text)
        print(f"wrote {args.header}")
        return 0
    try:
        current = args.header.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"{args.header}: cannot read ({exc}); run `python -m kda2.artifact.abi --write`", file=sys.stderr)
        return 1
    if current != text:
        import difflib

        sys.stderr.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                   str(args.header), "header_text()"))
        print(f"{args.header} is out of date with kda2/artifact/abi.py; run `python -m kda2.artifact.abi --write`",
              file=sys.stderr)
        return 1
    print(f"{args.header}: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
