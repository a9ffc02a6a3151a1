"""`kda2 calibrate --out profiles/<name>.yaml`: measure the GPU this runs on and write a hardware profile.

Device attributes (cuda-python driver API): SM count, shared memory per SM and per block (opt-in) and the
driver's per-block reservation, registers per SM, threads and blocks per SM, L2 size, compute capability
(-> arch); the few facts with no attribute (255 registers per thread, the 256-register allocation unit, 4 warp
schedulers per SM) are constants below, the same on every arch kda2 builds for. Measured:
  - copy bandwidth: cuMemcpyDtoD of a 1 GiB buffer, bytes read + written per second, median of CUDA-event
    timings (the same convention as the project's measured 4.27 TB/s on the H200);
  - tensor-core rate: a generated kernel of independent `mma.sync` chains (bf16 m16n8k16, tf32 m16n8k8,
    fp32 accumulate: the instruction family the kernels use), 8 warps per block, 4 blocks per SM, compiled
    with NVRTC through cuda-python (or nvcc when NVRTC is not installed), FLOPs / median time;
  - launch latency: median time per launch of an empty kernel over 1000 back-to-back launches from Python
    (event-timed): what a Python caller pays per small kernel, host enqueue included (an upper bound of
    the GPU-side launch gap).
Nothing here needs torch. On a machine without a usable GPU it raises CalibrateError with one line.
"""
from __future__ import annotations

import ctypes
import datetime as _dt
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kda2.artifact.atomic import write_text

#: Facts with no device attribute, the same on every arch kda2 builds for (sm_80 … sm_90a): the ISA's register
#: limit per thread (PTX ISA), the per-warp register allocation unit (CUDA Occupancy Calculator) and the warp
#: schedulers per SM (the Ampere and Hopper whitepapers: four SM sub-partitions).
ISA_MAX_REGISTERS_PER_THREAD = 255
REGISTER_ALLOC_UNIT = 256
WARP_SCHEDULERS_PER_SM = 4

_KERNELS = r"""
extern "C" __global__ void kda2_empty() {}

// ITERS rounds of CHAINS independent mma.sync per warp; the accumulators are written out so nothing is
// dead code. Operands are constant registers (A: 1.0 in the precision's encoding): only the tensor pipe's
// issue rate is measured.
#define CHAINS 8
#define KDA2_MMA_KERNEL(NAME, ONE, SHAPE_TYPES)                                                              \
  extern "C" __global__ void NAME(float* out, int iters) {                                                   \
    unsigned a0 = ONE, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0;                                          \
    float c[CHAINS][4] = {};                                                                                 \
    for (int i = 0; i < iters; ++i) {                                                                        \
      _Pragma("unroll") for (int j = 0; j < CHAINS; ++j)                                                     \
        asm volatile("mma.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
                     : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])                            \
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));                                \
    }                                                                                                        \
    float s = 0.f;                                                                                           \
    _Pragma("unroll") for (int j = 0; j < CHAINS; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];           \
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;                                                          \
  }
KDA2_MMA_KERNEL(kda2_mma_bf16, 0x3f803f80u, "m16n8k16.row.col.f32.bf16.bf16.f32")
KDA2_MMA_KERNEL(kda2_mma_tf32, 0x3f800000u, "m16n8k8.row.col.f32.tf32.tf32.f32")
"""
CHAINS = 8
#: FLOPs of one mma.sync per warp: 2 * M * N * K.
MMA_FLOPS = {"bf16": 2 * 16 * 8 * 16, "tf32": 2 * 16 * 8 * 8}
WARPS_PER_BLOCK = 8
BLOCKS_PER_SM = 4


class CalibrateError(RuntimeError):
    """Calibration cannot run here (no GPU, no compiler) or failed; str() is one line."""


def arch_of(major: int, minor: int) -> str:
    """The arch kda2 compiles for on this compute capability (sm_90a: Hopper's tensor-core code)."""
    arch = {(8, 0): "sm_80", (8, 6): "sm_86", (8, 9): "sm_89", (9, 0): "sm_90a"}.get((major, minor))
    if arch is None:
        raise CalibrateError(f"compute capability {major}.{minor} is not an arch kda2 builds for "
                             f"(sm_80, sm_86, sm_89, sm_90a)")
    return arch


class _Driver:
    """The few driver calls calibration needs, each checked (an error is a CalibrateError naming the call)."""

    def __init__(self):
        try:
            from cuda.bindings import driver as cu
        except Exception as e:  # noqa: BLE001 - a missing or broken cuda-python is a setup problem, one line
            raise CalibrateError(f"cuda-python is not usable here ({type(e).__name__}: {e}); "
                                 "pip install cuda-python") from None
        self.cu = cu
        try:
            err = cu.cuInit(0)[0]
        except Exception as e:  # noqa: BLE001 - no libcuda.so (no driver): one line, no traceback
            raise CalibrateError(f"no CUDA driver on this machine ({type(e).__name__}: {e}); run kda2 calibrate on "
                                 "the GPU host") from None
        if err != cu.CUresult.CUDA_SUCCESS:
            raise CalibrateError(f"no usable CUDA GPU here (cuInit: {cu.cuGetErrorName(err)[1].decode()}); "
                                 "run kda2 calibrate on the GPU host")
        n = self.ok(cu.cuDeviceGetCount(), "cuDeviceGetCount")
        if n < 1:
            raise CalibrateError("no CUDA GPU visible (cuDeviceGetCount = 0); run kda2 calibrate on the GPU host")
        self.dev = self.ok(cu.cuDeviceGet(0), "cuDeviceGet")
        self.ctx = self.ok(cu.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self.ok(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def ok(self, res: Any, what: str) -> Any:
        err, *vals = res if isinstance(res, tuple) else (res,)
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise CalibrateError(f"{what} failed: {self.cu.cuGetErrorName(err)[1].decode()}")
        return vals[0] if len(vals) == 1 else vals or None

    def attr(self, name: str) -> int:
        a = getattr(self.cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(self.ok(self.cu.cuDeviceGetAttribute(a, self.dev), f"cuDeviceGetAttribute({name})"))

    def name(self) -> str:
        raw = self.ok(self.cu.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        return raw.split(b"\0", 1)[0].decode()

    def timed(self, enqueue, reps: int) -> float:
        """Median milliseconds of `enqueue()` between two events, over `reps` runs (after one warm-up)."""
        cu = self.cu
        enqueue()
        self.ok(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        start = self.ok(cu.cuEventCreate(0), "cuEventCreate")
        end = self.ok(cu.cuEventCreate(0), "cuEventCreate")
        samples = []
        for _ in range(reps):
            self.ok(cu.cuEventRecord(start, 0), "cuEventRecord")
            enqueue()
            self.ok(cu.cuEventRecord(end, 0), "cuEventRecord")
            self.ok(cu.cuEventSynchronize(end), "cuEventSynchronize")
            samples.append(float(self.ok(cu.cuEventElapsedTime(start, end), "cuEventElapsedTime")))
        cu.cuEventDestroy(start)
        cu.cuEventDestroy(end)
        return statistics.median(samples)


def _compile(arch: str) -> bytes:
    """The calibration kernels as a cubin for `arch`: NVRTC (cuda-python) if it loads, else nvcc."""
    try:
        from cuda.bindings import nvrtc

        def ok(res, what):
            err, *vals = res if isinstance(res, tuple) else (res,)
            if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise CalibrateError(f"{what} failed: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
            return vals[0] if vals else None

        prog = ok(nvrtc.nvrtcCreateProgram(_KERNELS.encode(), b"kda2_calibrate.cu", 0, [], []), "nvrtcCreateProgram")
        opts = [f"--gpu-architecture={arch}".encode()]  # NVRTC optimises device code by default; it rejects -O3
        err = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            size = ok(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            buf = b" " * size
            ok(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            raise CalibrateError(f"NVRTC could not compile the calibration kernels: {buf.decode().strip()[:300]}")
        size = ok(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        ok(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin
    except CalibrateError:
        raise
    except Exception:  # noqa: BLE001 - NVRTC not installed: fall back to nvcc
        pass
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise CalibrateError("neither NVRTC (pip install nvidia-cuda-nvrtc) nor nvcc is available to compile the "
                             "calibration kernels")
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.cu", Path(d) / "k.cubin"
        src.write_text(_KERNELS)
        proc = subprocess.run([nvcc, "-cubin", "-O3", f"-arch={arch}", "-o", str(out), str(src)],
                              capture_output=True, text=True)
        if proc.returncode:
            raise CalibrateError(f"nvcc could not compile the calibration kernels: {proc.stderr.strip()[:300]}")
        return out.read_bytes()


def measure(quick: bool = False) -> dict[str, Any]:
    """Every profile field this GPU can tell or show (no name/source/date: `calibrate` adds them)."""
    d = _Driver()
    cu = d.cu
    major, minor = d.attr("COMPUTE_CAPABILITY_MAJOR"), d.attr("COMPUTE_CAPABILITY_MINOR")
    arch = arch_of(major, minor)
    sms = d.attr("MULTIPROCESSOR_COUNT")
    facts: dict[str, Any] = {
        "gpu": d.name(), "arch": arch, "sm_count": sms,
        "smem_per_sm_bytes": d.attr("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        "smem_per_block_bytes": d.attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        "registers_per_sm": d.attr("MAX_REGISTERS_PER_MULTIPROCESSOR"),
        "registers_per_thread_max": ISA_MAX_REGISTERS_PER_THREAD,
        "threads_per_sm_max": d.attr("MAX_THREADS_PER_MULTIPROCESSOR"),
        "blocks_per_sm_max": d.attr("MAX_BLOCKS_PER_MULTIPROCESSOR"),
        "smem_reserved_per_block_bytes": d.attr("RESERVED_SHARED_MEMORY_PER_BLOCK"),
        "register_alloc_unit": REGISTER_ALLOC_UNIT, "warp_schedulers_per_sm": WARP_SCHEDULERS_PER_SM,
        "l2_bytes": d.attr("L2_CACHE_SIZE"),
    }
    reps = 5 if quick else 15
    # copy bandwidth: 1 GiB device-to-device, read + written
    nbytes = 1 << 30
    src = d.ok(cu.cuMemAlloc(nbytes), "cuMemAlloc")
    dst = d.ok(cu.cuMemAlloc(nbytes), "cuMemAlloc")
    try:
        d.ok(cu.cuMemsetD8(src, 1, nbytes), "cuMemsetD8")
        ms = d.timed(lambda: d.ok(cu.cuMemcpyDtoDAsync(dst, src, nbytes, 0), "cuMemcpyDtoDAsync"), reps)
        facts["copy_bandwidth_bytes_per_s"] = float(f"{2 * nbytes / (ms * 1e-3):.4g}")
    finally:
        cu.cuMemFree(src)
        cu.cuMemFree(dst)
    # kernels: launch latency and mma rates
    import numpy as np

    image = np.frombuffer(_compile(arch), dtype=np.uint8)  # an address the binding takes as is; kept alive here
    module = d.ok(cu.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData")
    empty = d.ok(cu.cuModuleGetFunction(module, b"kda2_empty"), "cuModuleGetFunction")
    launches = 200 if quick else 1000

    def burst():
        for _ in range(launches):
            d.ok(cu.cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0), "cuLaunchKernel")

    facts["launch_latency_us"] = round(d.timed(burst, reps) * 1e3 / launches, 3)
    blocks, threads = sms * BLOCKS_PER_SM, 32 * WARPS_PER_BLOCK
    out = d.ok(cu.cuMemAlloc(blocks * threads * 4), "cuMemAlloc")
    rates = {}
    try:
        for prec in ("bf16", "tf32"):
            fn = d.ok(cu.cuModuleGetFunction(module, f"kda2_mma_{prec}".encode()), "cuModuleGetFunction")
            iters = 2000 if quick else 8000
            args = ((int(out), iters), (ctypes.c_void_p, ctypes.c_int))

            def run(fn=fn, args=args):
                d.ok(cu.cuLaunchKernel(fn, blocks, 1, 1, threads, 1, 1, 0, 0, args, 0), "cuLaunchKernel")

            ms = d.timed(run, reps)
            flops = blocks * WARPS_PER_BLOCK * iters * CHAINS * MMA_FLOPS[prec]
            rates[prec] = float(f"{flops / (ms * 1e-3):.4g}")
    finally:
        cu.cuMemFree(out)
        cu.cuModuleUnload(module)
    facts["tensor_flops_per_s"] = rates
    return facts


def _yaml(data: dict[str, Any]) -> str:
    """The profile as YAML, by hand: flat scalars and one flow mapping (calibrate runs on GPU hosts that may
    lack PyYAML; kda2.plan.profile reads it back with yaml.safe_load)."""
    def scalar(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):  # YAML 1.1 (PyYAML) reads 4.27e12 as a string: keep a dot and a signed exponent
            return repr(v) if "e" not in repr(v) else f"{v:.4e}"
        if isinstance(v, int):
            return str(v)
        return json.dumps(str(v))  # a JSON string is a valid YAML double-quoted scalar
    lines = []
    for k, v in data.items():
        if isinstance(v, dict):
            lines.append(f"{k}: {{" + ", ".join(f"{a}: {scalar(b)}" for a, b in v.items()) + "}")
        else:
            lines.append(f"{k}: {scalar(v)}")
    return "\n".join(lines) + "\n"


def calibrate(out: str, *, name: str | None = None, quick: bool = False) -> Path:
    """Measure and write `out` as a profile (source: measured); validated like any profile where pydantic is
    installed (kda2.plan.profile), else checked again wherever the planner loads it."""
    path = Path(out)
    if path.suffix != ".yaml":
        raise CalibrateError(f"--out {out}: allowed: a .yaml path (profiles/<name>.yaml)")
    name = name or path.stem
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,47}", name):
        raise CalibrateError(f"profile name {name!r}: allowed: [a-z][a-z0-9_-]{{0,47}} (from --name or the file name)")
    facts = measure(quick=quick)
    data = {"name": name, **facts, "default_for_arch": False, "source": "measured",
            "date": _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
            "command": "kda2 " + " ".join(sys.argv[1:]) if sys.argv[1:] else f"kda2 calibrate --out {out}"}
    order = ["name", "gpu", "arch", "default_for_arch", "sm_count", "smem_per_sm_bytes", "smem_per_block_bytes",
             "registers_per_sm", "registers_per_thread_max", "threads_per_sm_max", "blocks_per_sm_max",
             "smem_reserved_per_block_bytes", "register_alloc_unit", "warp_schedulers_per_sm", "l2_bytes",
             "copy_bandwidth_bytes_per_s", "tensor_flops_per_s", "launch_latency_us", "source", "date", "command"]
    header = ("# Measured by `kda2 calibrate` (kda2/tools/calibrate.py): device attributes; copy = 1 GiB D2D, read +\n"
              "# written; tensor = mma.sync bf16 m16n8k16 / tf32 m16n8k8 chains; launch = empty kernel, back to back.\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    if name != path.stem:
        raise CalibrateError(f"--name {name}: must equal the file name {path.stem!r} (profiles are looked up by it)")
    write_text(path, header + _yaml({k: data[k] for k in order}))
    try:
        from kda2.plan.profile import ProfileError, load_profile
    except ImportError:
        return path  # no pydantic/PyYAML on this host: the planner validates it where it is used
    try:
        load_profile(path)
    except ProfileError as e:
        raise CalibrateError(f"the measured profile does not validate: {e}") from None
    return path
