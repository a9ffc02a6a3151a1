"""cuDNN-frontend's fused Hopper KDA forward as a benchmark peer (nvidia-cudnn-frontend ≥ 1.32, sm90 only).

What is called: `cudnn.linear_attention.hopper.cuda_host.launch`, the raw launch under cuDNN-FE's graph API
(the `KdaHopperCudaEngine` plan calls the same function). One `kda_fused` kernel, grid (H, N·P), 128 threads,
94,464 B dynamic shared memory, compiled from the wheel's `cuda_kernels/kda_fused_sm90.cu` with NVRTC through
cuda-python (`cake/compiler.py`; cubins cached under $CUDNN_FRONTEND_CAKE_CACHE_DIR, else
~/.cache/cudnn_frontend/cake). P (pieces per sequence) is its own heuristic, `pieces_per_sequence`: ~264 CTAs,
never more pieces than 16-token chunks. A piece after the first starts from a zero state after a warm-up over
earlier chunks that stops once the decay bound says the dropped state is below 2^-20 (a truncation, not an
exact split; kda2's split is exact, docs/DESIGN.md §1).

Its contract (read from cuda_engine.py / the kernel): THD-packed bf16 q, k, v [T_total, H, 128]; fp32 g
[T_total, H, 128] (log-space decay, or the raw gate under its safe-gate fusion); fp32 beta [T_total, H]; int32
cu_seqlens [N+1]; fp32 states V-first [N, H, V, K] in and out; bf16 o [T_total, H, V]; fusion flags compiled in:
L2NORM (x·rsqrt(Σx²+1e-6), as FLA), SAFE_GATE (`lower_bound·sigmoid(exp(A_log)·(g + dt_bias))`, FLA's
`lower_bound` gate with safe_gate=True), BETA_SIGMOID. There is no softplus gate: for it the gate
`−exp(A_log)·softplus(g + dt_bias)` is precomputed in fp32 by a torch expression (`softplus_gate`).

Import (`import_cuda_host`): the wheel's `cudnn/__init__.py` loads the compiled pybind extension (cp312 only,
dlopens the cuDNN library for the graph API) and the graph layer; none of that is on the launch path. So unless
`cudnn` is already imported, a bare package object stands in for `cudnn` (its `__path__` is the wheel's cudnn
directory, `__init__.py` is not executed, `_pybind_module` is an empty namespace: `cudnn._device` only reads an
optional attribute from it), and these modules load: cudnn._device, cudnn.frost, cudnn.frost.device,
cudnn.linear_attention, cudnn.linear_attention.cake, ...cake.compiler, cudnn.linear_attention.hopper,
...hopper.cuda_host. They need: the wheel's files (pip install --no-deps; neither the cuDNN C library, the
compiled extension, nvidia-cutlass-dsl nor apache-tvm-ffi), cuda-python (cuda.bindings.driver and .nvrtc, so
libnvrtc), and CUDA headers (cuda_bf16.h, mma.h) in $CUDA_HOME/include, the pip nvidia/cu13 (or cu12) include
tree, or /usr/local/cuda/include. torch is ours (tensors), not theirs. The stand-in stays in sys.modules for the
process: a later full `import cudnn` there gets the stand-in.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any, Callable, Sequence

HOST_MODULE = "cudnn.linear_attention.hopper.cuda_host"
HOST_FILE = Path("linear_attention") / "hopper" / "cuda_host.py"
DIST = "nvidia-cudnn-frontend"
HEAD_DIM = 128
LOWER_BOUND = -5.0
#: What the adapter feeds cuDNN per gate of the chunk benchmark (recorded in the JSON).
GATE_MODES = {
    "lower_bound": "raw gate, its SAFE_GATE fusion: -5·sigmoid(exp(A_log)·(g + dt_bias)) in kernel (fp32 copy of g)",
    "softplus": "no softplus in cuDNN: -exp(A_log)·softplus(g + dt_bias) precomputed in fp32 by a torch expression",
}


class CudnnUnavailable(RuntimeError):
    """cuDNN-FE's Hopper KDA launch path cannot be imported here (the reason is the message)."""


# ---- import -----------------------------------------------------------------------------------------

def _stand_in(pkg_dir: Path) -> types.ModuleType:
    m = types.ModuleType("cudnn", "stand-in for nvidia-cudnn-frontend's cudnn package (kda2.bench.cudnn_peer): "
                                  "__init__.py not executed")
    spec = importlib.machinery.ModuleSpec("cudnn", None, is_package=True)
    spec.submodule_search_locations = [str(pkg_dir)]
    m.__spec__, m.__path__, m.__package__ = spec, [str(pkg_dir)], "cudnn"
    m.__file__ = None
    m._pybind_module = types.SimpleNamespace()  # cudnn._device: getattr(_pybind_module, "_try_ensure_current_context", None)
    m._kda2_stand_in = True
    return m


def find_package(search_path: Sequence[str] | None = None) -> Path:
    """The directory of the `cudnn` package (without importing it), checked to hold the Hopper KDA host."""
    if search_path is None:
        loaded = sys.modules.get("cudnn")
        if loaded is not None and getattr(loaded, "__path__", None):
            pkg = Path(list(loaded.__path__)[0])
        else:
            spec = importlib.util.find_spec("cudnn")
            if spec is None or not spec.submodule_search_locations:
                raise CudnnUnavailable(f"no 'cudnn' package on sys.path ({DIST} is not installed)")
            pkg = Path(list(spec.submodule_search_locations)[0])
    else:
        finder = importlib.machinery.PathFinder.find_spec("cudnn", list(search_path))
        if finder is None or not finder.submodule_search_locations:
            raise CudnnUnavailable(f"no 'cudnn' package under {list(search_path)} ({DIST} is not installed)")
        pkg = Path(list(finder.submodule_search_locations)[0])
    if not (pkg / HOST_FILE).is_file():
        raise CudnnUnavailable(f"the cudnn package at {pkg} has no {HOST_FILE} (needs {DIST} >= 1.32)")
    return pkg


def import_cuda_host(search_path: Sequence[str] | None = None) -> tuple[types.ModuleType, dict]:
    """(cudnn.linear_attention.hopper.cuda_host, facts about the import). Raises CudnnUnavailable."""
    pkg = find_package(search_path)
    info: dict[str, Any] = {"package_dir": str(pkg)}
    loaded = sys.modules.get("cudnn")
    if loaded is None:
        sys.modules["cudnn"] = _stand_in(pkg)
        info["import"] = "stand-in cudnn package (cudnn/__init__.py not executed)"
    elif getattr(loaded, "_kda2_stand_in", False):
        info["import"] = "stand-in cudnn package (cudnn/__init__.py not executed)"
    else:
        info["import"] = "cudnn already imported in full"
    try:
        host = importlib.import_module(HOST_MODULE)
    except Exception as exc:  # noqa: BLE001 - any failure below is 'not importable', with the reason
        if getattr(sys.modules.get("cudnn"), "_kda2_stand_in", False):
            for name in [n for n in sys.modules if n == "cudnn" or n.startswith("cudnn.")]:
                del sys.modules[name]
        raise CudnnUnavailable(f"importing {HOST_MODULE}: {type(exc).__name__}: {exc}") from exc
    info["modules"] = sorted(n for n in sys.modules if n == "cudnn" or n.startswith("cudnn."))
    try:
        from importlib import metadata

        info["version"] = metadata.version(DIST)
    except Exception:  # noqa: BLE001 - informational
        info["version"] = None
    info["split"] = ("P pieces per sequence (its pieces_per_sequence); a piece after the first starts from a zero "
                     "state after warming up over earlier chunks until its decay bound is below 2^-20: a truncation, "
                     "not an exact split")
    for what, attr in (("kernel", "KERNEL_BODY"), ("smem_bytes", "SMEM_BYTES"), ("block", "BLOCK"),
                       ("target_ctas", "TARGET_CTAS"), ("chunk", "CHUNK")):
        info[what] = getattr(host, attr, None)
    return host, info


def toolchain(host: types.ModuleType) -> dict:
    """NVRTC version and the CUDA include tree cuDNN will compile with (raises when either is missing)."""
    compiler = importlib.import_module("cudnn.linear_attention.cake.compiler")
    return {"nvrtc": ".".join(map(str, compiler.nvrtc_version())),
            "include_dirs": [str(p) for p in compiler.cuda_include_dirs()], "cache_dir": str(compiler.cache_dir())}


# ---- input marshalling (pure: torch or numpy arrays) --------------------------------------------

def flags(host: Any, gate: str, l2norm: bool = True, beta_sigmoid: bool = True) -> int:
    """The kernel's fusion flags for a benchmark gate (safe gate only for `lower_bound`)."""
    f = 0
    if l2norm:
        f |= host.FLAG_L2NORM
    if gate == "lower_bound":
        f |= host.FLAG_SAFE_GATE
    elif gate != "softplus":
        raise ValueError(f"unknown gate {gate!r}")
    if beta_sigmoid:
        f |= host.FLAG_BETA_SIGMOID
    return f


def softplus_generic(xp: Any) -> Callable[[Any], Any]:
    """softplus(x) = max(x, 0) + log1p(exp(−|x|)) with ops numpy and torch share (no overflow)."""
    return lambda x: (x + xp.abs(x)) / 2 + xp.log1p(xp.exp(-xp.abs(x)))


def softplus_gate(xp: Any, g: Any, A_log: Any, dt_bias: Any, softplus: Callable[[Any], Any] | None = None) -> Any:
    """−exp(A_log[h]) · softplus(g + dt_bias[h, :]) for g [..., H, K] (A_log [H], dt_bias [H·K]), in g's dtype.

    On the GPU the benchmark calls it with xp=torch, g in fp32 and softplus=torch.nn.functional.softplus
    (threshold 20, as FLA); the tests check the same expression with numpy against kda2.reference."""
    H, K = g.shape[-2], g.shape[-1]
    sp = softplus or softplus_generic(xp)
    return sp(g + dt_bias.reshape(H, K)) * (-xp.exp(A_log)).reshape(H, 1)


def seq_table(B: int, T: int, cu_seqlens: Sequence[int] | None) -> list[int]:
    """cu_seqlens of the THD packing: the given one (varlen, B = 1) or B equal sequences of T."""
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError("varlen inputs are packed with B = 1")
        return [int(c) for c in cu_seqlens]
    return [b * T for b in range(B + 1)]


def thd_shapes(B: int, T: int, H: int, N: int, K: int = HEAD_DIM, V: int = HEAD_DIM) -> dict[str, tuple]:
    """Shapes (and dtypes, by name) of every operand cuDNN's kernel reads or writes."""
    TT = B * T
    return {"q": ((TT, H, K), "bfloat16"), "k": ((TT, H, K), "bfloat16"), "v": ((TT, H, V), "bfloat16"),
            "g": ((TT, H, K), "float32"), "beta": ((TT, H), "float32"), "cu_seqlens": ((N + 1,), "int32"),
            "initial_state": ((N, H, V, K), "float32"), "o": ((TT, H, V), "bfloat16"),
            "final_state": ((N, H, V, K), "float32"), "A_log": ((H,), "float32"), "dt_bias": ((H * K,), "float32")}


def pieces(host: Any, total_tokens: int, n_seqs: int, n_heads: int) -> int:
    return int(host.pieces_per_sequence(total_tokens, n_seqs, n_heads))


# ---- the peer ---------------------------------------------------------------------------------------

class Cudnn:
    """Calls `cuda_host.launch` with the benchmark's inputs (same q/k/v/g/beta/h0, A_log/dt_bias as kda2 and FLA).

    `call` times the kernel alone on inputs marshalled beforehand (fp32 g: the raw gate, or the precomputed
    softplus gate; fp32 beta; int32 cu_seqlens); `call_with_prep` also runs that marshalling per call (the
    bf16→fp32 casts, plus the softplus-gate expression), which is what a caller holding FLA's inputs pays."""

    name = "cudnn"
    entry = f"{HOST_MODULE}.launch (raw launch under cuDNN-FE's KdaHopperCudaEngine)"

    def __init__(self, search_path: Sequence[str] | None = None):
        self.host, self.info = import_cuda_host(search_path)
        self.info.update(toolchain(self.host))

    def _prep(self, torch, x: dict, shared: dict, gate: str) -> tuple:
        g = x["g"].float()
        if gate == "softplus":
            g = softplus_gate(torch, g, shared["A_log"], shared["dt_bias"], torch.nn.functional.softplus)
        return g.contiguous(), x["beta"].float().contiguous()

    def marshal(self, torch, sets: list, shared: dict, gate: str, s) -> dict:
        """Per-set fp32 g / beta (made once, outside timing), int32 cu_seqlens, THD outputs, and P."""
        cu = seq_table(s.B, s.T, s.cu_seqlens)
        total, n = cu[-1], len(cu) - 1
        H = s.H
        m = {"cu": torch.tensor(cu, dtype=torch.int32, device="cuda"), "total": total, "N": n, "H": H,
             "P": pieces(self.host, total, n, H), "flags": flags(self.host, gate), "gate": gate,
             "prepped": [self._prep(torch, x, shared, gate) for x in sets],
             "o": [torch.empty(total, H, x["v"].shape[-1], dtype=torch.bfloat16, device="cuda") for x in sets],
             "ht": [torch.empty_like(x["h0"]) for x in sets]}
        return m

    def _launch(self, torch, x: dict, shared: dict, m: dict, g, beta, o, ht) -> None:
        lb = m["gate"] == "lower_bound"
        self.host.launch(device=torch.cuda.current_device(), stream=torch.cuda.current_stream().cuda_stream,
                         q=x["q"].data_ptr(), k=x["k"].data_ptr(), v=x["v"].data_ptr(), g=g.data_ptr(),
                         beta=beta.data_ptr(), cu_seqlens=m["cu"].data_ptr(), initial_state=x["h0"].data_ptr(),
                         o=o.data_ptr(), final_state=ht.data_ptr(), total_tokens=m["total"], n_seqs=m["N"],
                         n_heads=m["H"], a_log=shared["A_log"].data_ptr() if lb else 0,
                         dt_bias=shared["dt_bias"].data_ptr() if lb else 0, gate_lower_bound=LOWER_BOUND,
                         flags=m["flags"], q_scale=HEAD_DIM ** -0.5, n_qk_heads=m["H"])

    def call(self, torch, sets: list, shared: dict, m: dict) -> Callable[[int], Any]:
        def run(i):
            g, beta = m["prepped"][i]
            self._launch(torch, sets[i], shared, m, g, beta, m["o"][i], m["ht"][i])
            return m["o"][i], m["ht"][i]
        return run

    def call_with_prep(self, torch, sets: list, shared: dict, m: dict) -> Callable[[int], Any]:
        def run(i):
            g, beta = self._prep(torch, sets[i], shared, m["gate"])
            self._launch(torch, sets[i], shared, m, g, beta, m["o"][i], m["ht"][i])
            return m["o"][i], m["ht"][i]
        return run


def check_inputs(sets: list, v_first: bool) -> str | None:
    """Why cuDNN cannot take these inputs as they are (None when it can)."""
    if not v_first:
        return "cuDNN's kernel takes V-first states [N, H, V, K]; run the benchmark with --layout v_first"
    x = sets[0]
    if x["q"].shape[-1] != HEAD_DIM or x["v"].shape[-1] != HEAD_DIM:
        return f"cuDNN's kernel needs K = V = {HEAD_DIM}"
    if not all(t.is_contiguous() for t in (x["q"], x["k"], x["v"], x["h0"])):
        return "cuDNN's kernel indexes packed row-major operands"
    return None


def smoke(torch, gate: str, T: int = 100, H: int = 2, seed: int = 0) -> dict:
    """One small call per gate on the GPU (compiles and caches that flag set's cubin): first-call seconds, NaN/Inf
    count, and the relative L2 of o against kda2.reference in float64 on the same inputs."""
    import time

    import numpy as np

    from kda2.reference import chunk_kda_ref, relative_l2

    c = Cudnn()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *sh: torch.randn(*sh, generator=gen, device="cuda")  # noqa: E731
    x = dict(q=r(1, T, H, HEAD_DIM).bfloat16(), k=r(1, T, H, HEAD_DIM).bfloat16(), v=r(1, T, H, HEAD_DIM).bfloat16(),
             g=r(1, T, H, HEAD_DIM).bfloat16(), beta=r(1, T, H).bfloat16(), h0=r(1, H, HEAD_DIM, HEAD_DIM) * 0.1)
    shared = dict(A_log=r(H) * 0.5, dt_bias=r(H * HEAD_DIM), cu_seqlens=None)
    shape = types.SimpleNamespace(B=1, T=T, H=H, N=1, cu_seqlens=None)
    m = c.marshal(torch, [x], shared, gate, shape)
    t0 = time.perf_counter()
    o, ht = c.call(torch, [x], shared, m)(0)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    n = lambda t: t.detach().float().cpu().numpy().astype(np.float64)  # noqa: E731
    ref_o, ref_h = chunk_kda_ref(n(x["q"]), n(x["k"]), n(x["v"]), n(x["g"]), n(x["beta"]), initial_state=n(x["h0"]),
                                 output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                                 use_beta_sigmoid_in_kernel=True, A_log=n(shared["A_log"]),
                                 dt_bias=n(shared["dt_bias"]), state_v_first=True,
                                 lower_bound=LOWER_BOUND if gate == "lower_bound" else None)
    return {"gate": gate, "P": m["P"], "first_call_s": round(secs, 2),
            "nonfinite": int((~o.isfinite()).sum().item() + (~ht.isfinite()).sum().item()),
            "o_rel_l2_vs_fp64_ref": relative_l2(n(o).reshape(ref_o.shape), ref_o),
            "state_rel_l2_vs_fp64_ref": relative_l2(n(ht), ref_h)}


def main(argv: list[str] | None = None) -> int:
    """`python -m kda2.bench.cudnn_peer [--warm]`: say whether and how cuDNN-FE's Hopper KDA imports (JSON on
    stdout); --warm also runs `smoke` for both gates (on the GPU: NVRTC compiles, cubins cached)."""
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m kda2.bench.cudnn_peer", description=main.__doc__)
    ap.add_argument("--warm", action="store_true", help="one small launch per gate (compiles and caches the cubins)")
    args = ap.parse_args(argv)
    try:
        host, info = import_cuda_host()
        info.update(toolchain(host))
    except Exception as exc:  # noqa: BLE001 - the answer is the reason
        print(json.dumps({"available": False, "error": f"{type(exc).__name__}: {exc}"}, indent=1))
        return 1
    print(json.dumps({"available": True, **info}, indent=1), flush=True)
    if not args.warm:
        return 0
    import torch

    rc = 0
    for gate in ("softplus", "lower_bound"):
        try:
            res = smoke(torch, gate)
        except Exception as exc:  # noqa: BLE001 - reported, the other gate still runs
            res, rc = {"gate": gate, "error": f"{type(exc).__name__}: {exc}"}, 1
        print(json.dumps(res), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Cudnn", "CudnnUnavailable", "GATE_MODES", "check_inputs", "find_package", "flags", "import_cuda_host",
           "pieces", "seq_table", "softplus_gate", "softplus_generic", "thd_shapes", "toolchain"]
