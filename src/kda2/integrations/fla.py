"""kda2 as an FLA backend: FLA's KDA entry points run on the built kda2 libraries, FLA's callers unchanged.

Enable it (two steps, both needed)::

    import kda2.integrations.fla      # registers the backend with FLA's registry (idempotent: install())
    # and in the environment:  FLA_KDA2=1   (opt-in; unset or FLA_KDA2=0: FLA's own kernels)

Then FLA's layers (`fla.layers.KimiDeltaAttention`), models (`fla.models.KDAForCausalLM`) and any code calling
`fla.ops.kda.chunk_kda` / `fla.ops.kda.fused_recurrent_kda` use kda2 for every call the loaded kda2 libraries
can serve; any other call (training, float32 inputs, an input dtype, head size or feature not built,
chunk_size=32, ...) is declined with a reason and FLA runs its own kernel. FLA logs the choice once per entry
point, at INFO on the `fla.backends` logger: "[FLA Backend] fla.ops.kda.chunk.chunk_kda -> kda2" or "... -> kda2
rejected: <reason>" (the first call only). `status()` says what is loaded and why an entry point is unavailable.

Which calls ran where: `status()[entry]` (entry "chunk_kda" or "fused_recurrent_kda_fwd") also holds "served",
the number of calls kda2 ran, and "rejected", {reason: number of calls declined for it}, counted from import
(a dict increment per call, no lock: under concurrent threads a count may come out a little low). Only calls
FLA offers to kda2 are counted, i.e. with FLA_KDA2=1 and a library available (else "reason" says why none is).
Reasons name shapes (e.g. a sequence length), so at most `_MAX_REASONS` (64) distinct ones are kept per entry
point; calls declined for further new reasons are counted under the key `_OVERFLOW`. The first time a reason
is seen (per entry point, per process) this module's logger (`kda2.integrations.fla`) logs it at WARNING:
"kda2 FLA backend: chunk_kda call declined, FLA runs it: <reason> ...", so a fallback shows without INFO
logging; passing the cap logs one warning more. `status()` is JSON-serialisable (`json.dumps(status())`).

What is registered (flash-linear-attention 0.6, `fla.backends`):

- `KDA2ChunkBackend` for `fla.ops.kda.chunk_kda` (a dispatched function): the chunk-family kda2 library.
- `KDA2RecurrentBackend` for operation "kda", function `fused_recurrent_kda_fwd`: FLA 0.6 dispatches
  `fused_recurrent_kda` through that inner function (after its argument handling, e.g. the deprecated
  `transpose_state_layout`), so that is where a backend plugs in; the recurrent-family kda2 library.

Both have backend_type "kda2", env_var FLA_KDA2 (FLA also reads FLA_<BACKEND_TYPE>, the same name here),
default_enable False, and a priority ahead of FlashKDA's (FLA tries lower values first), so with
FLA_KDA2=1 kda2 is tried first and FlashKDA (if installed and enabled) or FLA's Triton kernels take what
kda2 declines.

Which libraries: every built library of the family that runs on this GPU, found once, lazily, on first
use: $KDA2_LIBRARY if it names a library of that family, else each spec under $KDA2_BUILD_DIR (default
./build, relative to the working directory) with its best arch for the current GPU. A call goes to the
first library whose head dims and compiled features accept it (so e.g. a K=V=128 and a K=V=64 spec can
serve different layers). `install(chunk_library=..., recurrent_library=...)` pins them instead (a
`kda2.runtime.Library`, a path `kda2.load` accepts, or a list of those). Nothing is loaded at import; with
no usable library (no GPU, nothing built, a build for another GPU) the backend reports `is_available()`
False, logs one line saying why (a warning when FLA_KDA2 is set, else INFO), and FLA keeps its kernels.

What a verifier accepts is what the library was built for, asked from the library (`Library.k/.v/.family/
.max_bucket/.arch` and its `Features`) on every call: inference only (`torch.is_grad_enabled()` False, e.g.
under `torch.inference_mode()`); q/k/v in one dtype the library was built for (`features.input_dtypes`:
bfloat16 and/or float16; every spec in kernel_specs/ builds both), g and beta float32 or q's dtype, `out` in
q's dtype, states float32, on a CUDA device the library's arch runs on; K and V of a built spec; a built GVA ratio HV/H; the gate mode
(precomputed / softplus / lower_bound, chosen from use_gate_in_kernel and lower_bound as FLA does),
use_qk_l2norm_in_kernel and use_beta_sigmoid_in_kernel only if compiled; the state layout (state_v_first)
if built; cu_seqlens only if varlen is built; chunk: chunk_size 64, no return_intermediate_states, no
cp_context, no use_graph; recurrent: the longest sequence within the largest seq_len bucket, headwise beta,
no ssm_state_indices / num_accepted_tokens (kda2's serving form is `kda2.fused_recurrent_kda_pool`).
Calls FLA itself rejects (e.g. allow_neg_eigval without use_beta_sigmoid_in_kernel) are declined too, so
FLA raises its own error. A_log / dt_bias in bfloat16 or float16 (a model cast with `.to(torch.bfloat16)` or `.half()`) are
converted to float32 (cached per parameter), as FLA's kernels read them in float32.

Arguments: the backend methods take FLA's own signatures (same positional order, same keywords) and call
`kda2.chunk_kda` / `kda2.fused_recurrent_kda` by keyword. FLA's deprecation behaviour is kept: `chunk_kda(..., transpose_state_layout=...)` warns with
FLA's DeprecationWarning (and raises FLA's ValueError together with state_v_first), because FLA's dispatcher
runs a backend before FLA's own function body would. (fused_recurrent_kda handles it before dispatch.)
Inputs are made contiguous as FLA's `input_guard` does. `fused_recurrent_kda_fwd(inplace_final_state=True)`
(its default) writes the final state into `initial_state` and returns it, as FLA's kernel does.
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
import threading
import warnings
import weakref
from typing import Any, ClassVar

try:
    from fla.backends import BaseBackend, register
except ImportError as _exc:  # FLA missing, or older than the 0.6 backend registry
    raise ImportError("kda2.integrations.fla needs flash-linear-attention >= 0.6 (its `fla.backends` registry); "
                      f"install it (pip install 'flash-linear-attention>=0.6'): {_exc}") from _exc

from kda2.runtime import abi
from kda2.runtime.api import fused_recurrent_kda as _kda2_fused_recurrent_kda
from kda2.runtime.chunk import chunk_kda as _kda2_chunk_kda
from kda2.runtime.device import arch_preference
from kda2.runtime.errors import KDA2InputError
from kda2.runtime.params import fp32_copy

__all__ = ["ENV_VAR", "KDA2ChunkBackend", "KDA2RecurrentBackend", "install", "libraries", "registered", "status"]

logger = logging.getLogger(__name__)

#: The opt-in switch (also FLA's per-type switch FLA_<BACKEND_TYPE> for backend_type "kda2").
ENV_VAR = "FLA_KDA2"
#: family -> the FLA function the backend of that family replaces.
ENTRY = {"chunk": "chunk_kda", "recurrent": "fused_recurrent_kda_fwd"}
_FLASH_KDA_PRIORITY = 3  # FLA 0.6's FlashKDABackend.priority, if it cannot be read

_BF16, _F16, _F32 = "torch.bfloat16", "torch.float16", "torch.float32"
#: features.input_dtypes name -> str(torch dtype); the 16-bit dtypes some kda2 build may take for q, k, v.
_INPUT_DTYPES = {"bf16": _BF16, "fp16": _F16}
_HALF = frozenset(_INPUT_DTYPES.values())
_INFERENCE_ONLY = ("kda2 is forward-only: torch.is_grad_enabled() is True (run under torch.inference_mode() "
                   "or torch.no_grad() to use kda2)")

_lock = threading.RLock()
_libs: dict[str, tuple] = {}           # family -> libraries serving it (probed on first use, or pinned)
_why: dict[str, str | None] = {}       # family -> why none is available (None when some are)
_arch_ok: dict[tuple[str, int], str | None] = {}  # (arch, device index) -> None, or why it cannot run there
_tls = threading.local()               # .pick = (id(q), library) from the verifier, for the call right after

#: Distinct rejection reasons kept per entry point (reasons name shapes); later new ones share _OVERFLOW.
_MAX_REASONS = 64
_OVERFLOW = "(other reasons: more distinct ones than kda2.integrations.fla._MAX_REASONS)"
_served: dict[str, int] = {"chunk": 0, "recurrent": 0}                  # family -> calls kda2 ran
_rejected: dict[str, dict[str, int]] = {"chunk": {}, "recurrent": {}}   # family -> {reason: calls declined}


# -- torch / device hooks (module functions, so the CPU tests can stand in for them) ----------------------
def _grad_enabled() -> bool:
    torch = sys.modules.get("torch")  # no torch imported -> no tensors to track
    return bool(torch is not None and torch.is_grad_enabled())


def _capturing() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def _capability(index: int | None = None) -> tuple[int, int]:
    """Compute capability of CUDA device `index` (default: torch's current device)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False (no CUDA device)")
    idx = torch.cuda.current_device() if index is None else index
    return tuple(torch.cuda.get_device_capability(idx))  # type: ignore[return-value]


# -- libraries ---------------------------------------------------------------------------------------------
def _opted_in() -> bool:
    return os.environ.get(ENV_VAR, "0") != "0"


def _describe(lib: Any) -> str:
    return f"{lib.spec} ({lib.family}, {lib.arch}, K={lib.k}, V={lib.v})"


def _find(family: str) -> tuple[tuple, list[str]]:
    """(libraries of `family` that run on the current GPU, notes on what was skipped)."""
    from kda2.runtime import loader
    from kda2.runtime.errors import ArtifactError

    prefs = arch_preference(_capability())
    if not prefs:
        return (), [f"no kda2 arch runs on this GPU (compute capability {_capability()})"]
    notes: list[str] = []
    env = os.environ.get(loader.ENV_LIBRARY)
    if env:
        lib = loader.load(env)
        if lib.family == family:
            if lib.arch not in prefs:
                return (), [f"{loader.ENV_LIBRARY}={env} is built for {lib.arch}; this GPU runs {prefs}"]
            return (lib,), []
        notes.append(f"{loader.ENV_LIBRARY}={env} is a {lib.family} library; looked under {loader.build_dir()}")
    libs = []
    for manifest in loader.discover(family=family):
        try:
            libs.append(loader.load(manifest))
        except ArtifactError as exc:
            notes.append(str(exc))
    return tuple(libs), notes


def _probe(family: str) -> tuple:
    try:
        libs, notes = _find(family)
    except Exception as exc:  # noqa: BLE001 - never raise into FLA's dispatcher: report and stand aside
        libs, notes = (), [f"{type(exc).__name__}: {exc}"]
    _set(family, libs, "; ".join(notes) or "no library found")
    return libs


def _set(family: str, libs: tuple, why: str) -> None:
    _libs[family] = libs
    _why[family] = None if libs else why
    if libs:
        logger.info("kda2 FLA backend: %s -> kda2 available on %s", ENTRY[family], ", ".join(map(_describe, libs)))
    else:
        logger.log(logging.WARNING if _opted_in() else logging.INFO,
                   "kda2 FLA backend: %s not available (FLA keeps its own kernels): %s", ENTRY[family], why)


def libraries(family: str) -> tuple:
    """The kda2 libraries serving `family` ("chunk" or "recurrent"); found on the first call, then cached."""
    libs = _libs.get(family)
    if libs is None:
        with _lock:
            libs = _libs.get(family)
            if libs is None:
                libs = _probe(family)
    return libs


def _pin(family: str, spec: Any) -> None:
    from kda2.runtime import loader

    items = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    libs = tuple(loader.load(x) if isinstance(x, (str, os.PathLike)) else x for x in items)
    for lib in libs:
        if lib.family != family:
            raise ValueError(f"{lib!r} is a {lib.family} library; {ENTRY[family]} needs a {family} library")
    _arch_ok.clear()
    _set(family, libs, "no library given")


# -- verdicts ----------------------------------------------------------------------------------------------
def _dt(t: Any) -> str:
    return str(t.dtype)


def _name(dtype: str) -> str:
    return dtype.replace("torch.", "")


def _tensor_reason(q, k, v, g, beta, initial_state) -> str | None:
    """Dtypes, ranks and device FLA accepts but kda2 does not (whether a library takes q's dtype at all is
    `_library_reason`'s, from its features.input_dtypes)."""
    if q.device.type != "cuda":
        return f"q is on {q.device}; kda2 runs on CUDA devices"
    if len(q.shape) != 4 or len(v.shape) != 4:
        return f"q {list(q.shape)} / v {list(v.shape)}: kda2 takes [B, T, H, K] / [B, T, HV, V]"
    qd = _dt(q)
    for name, t in (("k", k), ("v", v)):
        if _dt(t) != qd:
            return f"{name} is {_name(_dt(t))} but q is {_name(qd)}; kda2 takes q, k, v in one dtype"
    if len(beta.shape) != 3:
        return f"beta {list(beta.shape)}: kda2 takes headwise beta [B, T, HV] (no per-channel beta)"
    if qd in _HALF:  # else no library takes q: _library_reason says so, naming what is built
        for name, t in (("g", g), ("beta", beta)):
            if _dt(t) != _F32 and _dt(t) != qd:
                return f"{name} is {_name(_dt(t))}; with {_name(qd)} q, kda2 takes float32 or {_name(qd)} {name}"
    if initial_state is not None and _dt(initial_state) != _F32:
        return f"initial_state is {_dt(initial_state).replace('torch.', '')}; kda2 keeps states in float32"
    return None


def _gate(use_gate_in_kernel: bool, lower_bound: Any) -> str:
    if not use_gate_in_kernel:
        return "precomputed"
    return "softplus" if lower_bound is None else "lower_bound"


def _arch_reason(lib: Any, index: int | None) -> str | None:
    key = (lib.arch, -1 if index is None else index)
    if key not in _arch_ok:
        try:
            cap = _capability(index)
            prefs = arch_preference(cap)
            why = None if lib.arch in prefs else (f"{lib.spec} is built for {lib.arch}, which cannot run on "
                                                  f"cuda:{index} (compute capability {cap[0]}.{cap[1]})")
        except Exception as exc:  # noqa: BLE001
            why = f"cannot query cuda:{index} ({type(exc).__name__}: {exc})"
        _arch_ok[key] = why
    return _arch_ok[key]


def _library_reason(lib: Any, K: int, V: int, qd: str, ratio: int, gate: str, l2norm: bool, bsig: bool,
                    v_first: bool, varlen: bool, longest) -> str | None:
    """Why `lib` cannot serve the call (None: it can). Everything here is read from the library."""
    f = lib.features
    if lib.k != K or lib.v != V:
        return f"head dims K={K}, V={V}: {lib.spec} is built for K={lib.k}, V={lib.v}"
    built = f.input_dtypes
    if not any(_INPUT_DTYPES.get(d) == qd for d in built):
        names = " or ".join(_name(_INPUT_DTYPES.get(d, d)) for d in built)
        return f"q is {_name(qd)}; kda2's {lib.spec} takes {names} q, k, v"
    if ratio < 1:
        return f"GVA ratio HV/H={ratio}: HV must be a positive multiple of H"
    if gate not in f.gate_modes:
        return f"gate mode {gate!r} is not compiled into {lib.spec} (compiled: {list(f.gate_modes)})"
    if l2norm and not f.qk_l2norm:
        return f"use_qk_l2norm_in_kernel=True: qk_l2norm is not compiled into {lib.spec}"
    if bsig and not f.beta_sigmoid:
        return f"use_beta_sigmoid_in_kernel=True: beta_sigmoid is not compiled into {lib.spec}"
    layout = "v_first" if v_first else "k_first"
    if layout not in f.state_layouts:
        return f"state_v_first={bool(v_first)}: layout {layout} is not built into {lib.spec} " \
               f"(built: {list(f.state_layouts)})"
    if varlen and not f.varlen:
        return f"cu_seqlens given but varlen is not compiled into {lib.spec}"
    if lib.family == "recurrent":
        n = longest()
        if n > lib.max_bucket:
            return f"longest sequence {n} exceeds {lib.spec}'s largest seq_len bucket {lib.max_bucket}"
    return None


def _choose(family: str, q, v, gate: str, l2norm: bool, bsig: bool, v_first: bool, cu_seqlens) -> tuple:
    """(library, None) for the first library that serves the call, else (None, why not)."""
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if H == 0 or HV % H:
        return None, f"HV={HV} is not a multiple of H={H} (FLA reports it)"
    ratio = HV // H
    qd = _dt(q)
    varlen = cu_seqlens is not None
    memo: list[int] = []

    def longest() -> int:  # recurrent only, and only computed when it matters
        if not memo:
            if not varlen:
                memo.append(T)
            else:
                memo.append(T)
                if T > max(lib.max_bucket for lib in libs):  # only then read the lengths back (a host sync)
                    offs = [int(x) for x in cu_seqlens.tolist()]
                    memo[0] = max((b - a for a, b in zip(offs, offs[1:])), default=0)
        return memo[0]

    libs = libraries(family)
    reasons = []
    for lib in libs:
        why = _library_reason(lib, K, V, qd, ratio, gate, l2norm, bsig, v_first, varlen, longest)
        if why is None:
            why = _arch_reason(lib, q.device.index)
            if why is None:
                return lib, None
        reasons.append(why)
    return None, "; ".join(reasons) or (_why.get(family) or "no kda2 library loaded")


def _misaligned(tensors) -> str | None:
    """chunk kernels move rows in 16-byte pieces: a contiguous view starting mid-row would fault (FLA's would not)."""
    for name, t, n in tensors:
        if t is not None and t.is_contiguous():
            ptr = getattr(t, "data_ptr", None)
            if ptr is not None and ptr() % n:
                return f"{name} starts at a {n}-byte misaligned address (a view with a storage offset)"
    return None


def _contig(t: Any) -> Any:
    return t if t is None else t.contiguous()


def _take_pick(q: Any) -> Any:
    pick = getattr(_tls, "pick", None)
    _tls.pick = None
    if pick is not None and pick[0] == id(q):
        return pick[1]
    return None


_SKIP_FRAMES: tuple[str, ...] | None = None


def _caller_stacklevel() -> int:
    """stacklevel that makes a warning point at the code that called FLA's function, past the dispatch and
    torch.compiler.disable wrappers (and this module)."""
    global _SKIP_FRAMES
    if _SKIP_FRAMES is None:
        skip = [os.path.abspath(__file__)]
        for name in ("fla.backends", "torch"):
            mod = sys.modules.get(name)
            path = getattr(mod, "__file__", None)
            if path:
                skip.append(os.path.dirname(path) + os.sep if name == "torch" else os.path.abspath(path))
        _SKIP_FRAMES = tuple(skip)
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_SKIP_FRAMES):
        frame, level = frame.f_back, level + 1
    return level


# -- counters (status()["served"] / ["rejected"]) -------------------------------------------------------------
def _reject(family: str, why: Any) -> None:
    """Count a declined call; the first time a reason is seen for this entry point, log it at WARNING."""
    counts = _rejected[family]
    why = str(why)
    n = counts.get(why)
    if n is not None:  # the hot path: a reason seen before
        counts[why] = n + 1
        return
    with _lock:
        if why in counts:
            counts[why] += 1
            return
        if len(counts) < _MAX_REASONS:
            counts[why], msg = 1, why
        else:
            first = _OVERFLOW not in counts
            counts[_OVERFLOW] = counts.get(_OVERFLOW, 0) + 1
            if not first:
                return
            msg = (f"more than {_MAX_REASONS} distinct reasons; calls declined for new ones are counted under "
                   f"{_OVERFLOW!r} and not logged (latest: {why})")
    logger.warning("kda2 FLA backend: %s call declined, FLA runs it: %s (logged once per reason; counts in "
                   "kda2.integrations.fla.status())", ENTRY[family], msg)


def _counted(family: str):
    """Wrap a verifier so every verdict it declines is counted (and its reason logged once)."""
    def wrap(verifier):
        @functools.wraps(verifier)  # inspect.signature still shows FLA's parameters
        def counted(self, *args, **kwargs):
            try:
                ok, why = verifier(self, *args, **kwargs)
            except Exception as exc:  # FLA's BaseBackend.verify turns it into a rejection: count it as one
                _reject(family, f"{type(exc).__name__}: {exc}")
                raise
            if not ok:
                _reject(family, why)
            return ok, why
        return counted
    return wrap


# -- the backends --------------------------------------------------------------------------------------------
class _KDA2Backend(BaseBackend):
    """Shared switch and availability of the kda2 backends (one per kernel family)."""

    backend_type = "kda2"
    package_name = None
    env_var = ENV_VAR
    default_enable = False   # opt-in, like FlashKDA's switch FLA_FLASH_KDA (which defaults on)
    priority = 2             # ahead of FlashKDA (3) and TileLang (5); lower values are tried first
    family: ClassVar[str] = ""

    @classmethod
    def is_available(cls) -> bool:
        libs = _libs.get(cls.family)
        return bool(libs if libs is not None else libraries(cls.family))


class KDA2ChunkBackend(_KDA2Backend):
    """`fla.ops.kda.chunk_kda` on a chunk-family kda2 library (inference only)."""

    family = "chunk"

    @_counted("chunk")
    def chunk_kda_verifier(self, q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                           allow_neg_eigval=False, safe_gate=False, lower_bound=None, disable_recompute=False,
                           return_intermediate_states=False, state_v_first=False, cu_seqlens=None,
                           cu_seqlens_cpu=None, cp_context=None, use_graph=False, max_num_seqs=None,
                           **kwargs) -> tuple[bool, str | None]:
        _tls.pick = None
        if _grad_enabled():
            return False, _INFERENCE_ONLY
        if cp_context is not None:
            return False, "cp_context (context parallelism) is not supported by kda2"
        if return_intermediate_states:
            return False, "return_intermediate_states=True is not supported by kda2 (chunk states stay on chip)"
        if use_graph:
            return False, "use_graph=True (FLA's padded graph-replay varlen mode) is not supported by kda2"
        chunk_size = kwargs.get("chunk_size", abi.CHUNK)
        if chunk_size != abi.CHUNK:
            return False, f"chunk_size={chunk_size}: kda2 chunk kernels use {abi.CHUNK}-token chunks"
        if "transpose_state_layout" in kwargs:
            if state_v_first:
                return False, "both state_v_first and the deprecated transpose_state_layout (FLA reports it)"
            state_v_first = bool(kwargs["transpose_state_layout"])
        if use_gate_in_kernel:
            if kwargs.get("A_log") is None and lower_bound is None:
                return False, "use_gate_in_kernel=True without A_log or lower_bound (FLA reports it)"
            if safe_gate and (lower_bound is None or not -5 <= lower_bound < 0):
                return False, f"safe_gate=True needs lower_bound in [-5, 0), got {lower_bound} (FLA reports it)"
        if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
            return False, "allow_neg_eigval=True without use_beta_sigmoid_in_kernel=True (FLA reports it)"
        why = _tensor_reason(q, k, v, g, beta, initial_state)
        if why:
            return False, why
        if cu_seqlens is not None:
            if q.shape[0] != 1:
                return False, f"cu_seqlens with batch size {q.shape[0]} (FLA reports it)"
        why = _misaligned((("q", q, 16), ("k", k, 16), ("v", v, 16), ("g", g, 16), ("initial_state", initial_state, 8)))
        if why:
            return False, why
        lib, why = _choose("chunk", q, v, _gate(use_gate_in_kernel, lower_bound), use_qk_l2norm_in_kernel,
                           use_beta_sigmoid_in_kernel, state_v_first, cu_seqlens)
        if lib is None:
            return False, why
        _tls.pick = (id(q), lib)
        return True, None

    def chunk_kda(self, q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                  allow_neg_eigval=False, safe_gate=False, lower_bound=None, disable_recompute=False,
                  return_intermediate_states=False, state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                  cp_context=None, use_graph=False, max_num_seqs=None, **kwargs):
        """FLA 0.6 `chunk_kda`'s signature; runs `kda2.chunk_kda` (forward only). Returns (o, final_state)."""
        lib = _take_pick(q)
        if lib is None:  # called directly, not through FLA's dispatcher: verify here
            ok, why = self.chunk_kda_verifier(
                q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel,
                use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, safe_gate, lower_bound,
                disable_recompute, return_intermediate_states, state_v_first, cu_seqlens, cu_seqlens_cpu,
                cp_context, use_graph, max_num_seqs, **kwargs)
            if not ok:
                raise KDA2InputError(f"kda2 cannot run this chunk_kda call: {why}")
            lib = _take_pick(q)
        if "transpose_state_layout" in kwargs:  # what FLA's chunk_kda does (its body runs only on fallback)
            if state_v_first:
                raise ValueError("Cannot pass both `state_v_first` and the deprecated `transpose_state_layout`.")
            warnings.warn("`transpose_state_layout` is deprecated and renamed to `state_v_first`.",
                          DeprecationWarning, stacklevel=_caller_stacklevel())
            state_v_first = kwargs.pop("transpose_state_layout")
        gate = use_gate_in_kernel
        res = _kda2_chunk_kda(
            _contig(q), _contig(k), _contig(v), _contig(g), _contig(beta), scale=scale,
            initial_state=_contig(initial_state), output_final_state=output_final_state,
            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=use_gate_in_kernel,
            use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
            safe_gate=safe_gate, lower_bound=lower_bound, state_v_first=bool(state_v_first), cu_seqlens=cu_seqlens,
            A_log=fp32_copy(kwargs.get("A_log")) if gate else None, dt_bias=fp32_copy(kwargs.get("dt_bias")) if gate else None,
            library=lib, cu_seqlens_cpu=cu_seqlens_cpu)
        _served["chunk"] += 1
        return res


class KDA2RecurrentBackend(_KDA2Backend):
    """`fla.ops.kda.fused_recurrent_kda` (dispatched as operation "kda", `fused_recurrent_kda_fwd`) on a
    recurrent-family kda2 library."""

    family = "recurrent"

    @_counted("recurrent")
    def fused_recurrent_kda_fwd_verifier(self, q, k, v, g, beta, A_log=None, dt_bias=None, initial_state=None,
                                         scale=None, output_final_state=False, inplace_final_state=True,
                                         state_v_first=False, cu_seqlens=None, ssm_state_indices=None,
                                         num_accepted_tokens=None, use_qk_l2norm_in_kernel=False,
                                         use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
                                         allow_neg_eigval=False, lower_bound=None, out=None,
                                         **kwargs) -> tuple[bool, str | None]:
        _tls.pick = None
        if _grad_enabled():
            return False, _INFERENCE_ONLY
        if ssm_state_indices is not None or num_accepted_tokens is not None:
            return False, ("ssm_state_indices / num_accepted_tokens (FLA's continuous batching) are not taken by "
                           "this backend; kda2's serving form is kda2.fused_recurrent_kda_pool")
        if inplace_final_state:
            if initial_state is None:
                return False, "inplace_final_state=True without initial_state (FLA reports it)"
            if not initial_state.is_contiguous():
                return False, "inplace_final_state=True with a non-contiguous initial_state"
        if use_gate_in_kernel and A_log is None and lower_bound is None:
            return False, "use_gate_in_kernel=True without A_log or lower_bound: kda2's softplus gate needs A_log"
        if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
            return False, "allow_neg_eigval=True without use_beta_sigmoid_in_kernel=True (FLA reports it)"
        why = _tensor_reason(q, k, v, g, beta, initial_state)
        if why:
            return False, why
        if out is not None and (_dt(out) != _dt(q) or tuple(out.shape) != tuple(v.shape) or not out.is_contiguous()):
            return False, f"out must be a contiguous {_name(_dt(q))} tensor (q's dtype) shaped like v for kda2"
        if cu_seqlens is not None:
            if q.shape[0] != 1:
                return False, f"cu_seqlens with batch size {q.shape[0]}: kda2 takes packed [1, T, ...] inputs"
            # only past every library's largest bucket does `_choose` read the lengths back (a host sync, which
            # a capture forbids); kda2 itself reads nothing back
            if _capturing():
                top = max((lib.max_bucket for lib in libraries("recurrent")), default=0)
                if q.shape[1] > top:
                    return False, (f"varlen under CUDA graph capture with {q.shape[1]} packed tokens, past the "
                                   f"largest seq_len bucket ({top}): its longest sequence would be read back (a host "
                                   "sync)")
        lib, why = _choose("recurrent", q, v, _gate(use_gate_in_kernel, lower_bound), use_qk_l2norm_in_kernel,
                           use_beta_sigmoid_in_kernel, state_v_first, cu_seqlens)
        if lib is None:
            return False, why
        _tls.pick = (id(q), lib)
        return True, None

    def fused_recurrent_kda_fwd(self, q, k, v, g, beta, A_log=None, dt_bias=None, initial_state=None, scale=None,
                                output_final_state=False, inplace_final_state=True, state_v_first=False,
                                cu_seqlens=None, ssm_state_indices=None, num_accepted_tokens=None,
                                use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
                                use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, lower_bound=None, out=None,
                                **kwargs):
        """FLA 0.6 `fused_recurrent_kda_fwd`'s signature; runs `kda2.fused_recurrent_kda`. Returns (o, final_state)."""
        lib = _take_pick(q)
        if lib is None:
            ok, why = self.fused_recurrent_kda_fwd_verifier(
                q, k, v, g, beta, A_log, dt_bias, initial_state, scale, output_final_state, inplace_final_state,
                state_v_first, cu_seqlens, ssm_state_indices, num_accepted_tokens, use_qk_l2norm_in_kernel,
                use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval, lower_bound, out, **kwargs)
            if not ok:
                raise KDA2InputError(f"kda2 cannot run this fused_recurrent_kda call: {why}")
            lib = _take_pick(q)
        gate = use_gate_in_kernel
        common = dict(scale=scale, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, use_gate_in_kernel=gate,
                      use_beta_sigmoid_in_kernel=use_beta_sigmoid_in_kernel, allow_neg_eigval=allow_neg_eigval,
                      lower_bound=lower_bound, state_v_first=bool(state_v_first), cu_seqlens=cu_seqlens,
                      A_log=fp32_copy(A_log) if gate else None, dt_bias=fp32_copy(dt_bias) if gate else None,
                      library=lib, out=out)
        q, k, v, g, beta = _contig(q), _contig(k), _contig(v), _contig(g), _contig(beta)
        if inplace_final_state:  # FLA: the final state overwrites initial_state, which is returned
            o, _ = _kda2_fused_recurrent_kda(q, k, v, g, beta, initial_state=initial_state, output_final_state=True,
                                             final_state_out=initial_state, **common)
            res = o, initial_state
        else:
            res = _kda2_fused_recurrent_kda(q, k, v, g, beta, initial_state=_contig(initial_state),
                                            output_final_state=output_final_state, **common)
        _served["recurrent"] += 1
        return res


# -- registration --------------------------------------------------------------------------------------------
def _flash_kda_priority() -> int:
    try:
        from fla.ops.kda.backends.flash_kda import FlashKDABackend
        return int(FlashKDABackend.priority)
    except Exception:  # noqa: BLE001 - FLA without FlashKDA's module: assume 0.6's value
        return _FLASH_KDA_PRIORITY


def _chunk_entry():
    from fla.ops.kda.chunk import chunk_kda  # importing fla.ops.kda also registers FLA's own KDA backends

    return chunk_kda


def install(*, chunk_library: Any = None, recurrent_library: Any = None, rediscover: bool = False) -> dict:
    """Register the kda2 backends with FLA's registry. Idempotent: FLA keys backends by type, so calling it
    again replaces the same two entries (importing this module calls it once).

    `chunk_library` / `recurrent_library`: pin the libraries of that family (a `kda2.runtime.Library`, a path
    `kda2.load` accepts, or a list of those) instead of discovering them on first use. `rediscover=True`
    forgets every library found or pinned so far (they are looked up again on the next call).
    Returns `registered()`. The backends are used only with FLA_KDA2=1 in the environment.
    """
    import fla.backends as fb

    with _lock:
        if rediscover:
            _libs.clear()
            _why.clear()
            _arch_ok.clear()
        if chunk_library is not None:
            _pin("chunk", chunk_library)
        if recurrent_library is not None:
            _pin("recurrent", recurrent_library)
        flash = _flash_kda_priority()
        if _KDA2Backend.priority >= flash:
            _KDA2Backend.priority = flash - 1
        for what, entry, cls in (("chunk_kda", _chunk_entry, KDA2ChunkBackend),
                                 ("fused_recurrent_kda_fwd", lambda: "kda", KDA2RecurrentBackend)):
            try:
                register(entry())(cls)
            except Exception as exc:  # noqa: BLE001 - an FLA whose registry differs from 0.6's: say so, stand aside
                logger.warning("kda2 FLA backend: could not register for FLA's %s (%s: %s); FLA keeps its kernels",
                               what, type(exc).__name__, exc)
        if getattr(fb, "_DISPATCH_DISABLED", False):
            logger.warning("kda2 FLA backend: FLA_DISABLE_BACKEND_DISPATCH=1, so FLA bypasses every backend "
                           "(kda2 included) and always runs its own kernels")
    return registered()


def registered() -> dict:
    """{FLA function name: the kda2 backend instance FLA's registry holds} (read from FLA's registries; an
    entry is None where FLA holds none, e.g. with FLA_DISABLE_BACKEND_DISPATCH=1)."""
    import fla.backends as fb

    out: dict[str, Any] = {}
    fn_reg = getattr(fb, "_function_registries", {}).get(inspect.unwrap(_chunk_entry()))
    op_reg = getattr(fb, "_operation_registries", {}).get("kda")
    for name, reg in (("chunk_kda", fn_reg), ("fused_recurrent_kda_fwd", op_reg)):
        out[name] = getattr(reg, "_backends", {}).get("kda2") if reg is not None else None
    return out


def status() -> dict:
    """Per FLA function: enabled (FLA_KDA2), available (a library runs here), the libraries, and why not;
    "served" (calls kda2 ran) and "rejected" ({reason: calls declined}, a copy). JSON-serialisable.
    Finds the libraries if that has not happened yet."""
    out = {}
    for family, cls in (("chunk", KDA2ChunkBackend), ("recurrent", KDA2RecurrentBackend)):
        libs = libraries(family)
        out[ENTRY[family]] = {"family": family, "enabled": cls().is_enabled(), "available": bool(libs),
                              "priority": cls.priority, "libraries": [_describe(lib) for lib in libs],
                              "reason": _why.get(family), "served": _served[family],
                              "rejected": dict(_rejected[family])}
    return out


install()
