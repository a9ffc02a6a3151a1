"""Check kernels (tests/kernels/*.cu) on the GPU: compiled for sm_90a with the repository's headers and loaded in
torch's context through the driver API (cuda.bindings), so a test can launch them on torch tensors."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "src" / "kda2" / "codegen" / "include"


def check_module(torch, src: Path, out_dir: Path, flags: tuple[str, ...] = ()):
    """(function lookup, checked-call helper, driver module, unload) of a check kernel file, compiled for sm_90a into
    out_dir and loaded in torch's context."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"wgmma needs sm_90a (a Hopper GPU); this GPU is sm_{''.join(map(str, torch.cuda.get_device_capability()))}")
    from kda2.compile.toolchain import _which_nvcc

    cubin = Path(out_dir) / f"{src.stem}.cubin"
    proc = subprocess.run([_which_nvcc(), "-cubin", "-O3", "-gencode=arch=compute_90a,code=sm_90a", f"-I{INCLUDE}",
                           *flags, "-o", str(cubin), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, f"nvcc failed on {src.name}: {proc.stderr.strip()[:2000]}"
    from cuda.bindings import driver as cu

    def ok(res, what):
        err, *vals = res if isinstance(res, tuple) else (res,)
        assert err == cu.CUresult.CUDA_SUCCESS, f"{what}: {err}"
        return vals[0] if vals else None

    torch.zeros(1, device="cuda")  # torch's primary context is current from here on
    module = ok(cu.cuModuleLoadData(cubin.read_bytes()), "cuModuleLoadData")
    get = lambda name: ok(cu.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction {name}")  # noqa: E731
    return get, ok, cu, lambda: ok(cu.cuModuleUnload(module), "cuModuleUnload")


class Fused16:
    """tests/kernels/fused_check.cu (kda2/fused.cuh, the fused 16-token chunk forward) on torch tensors: one CTA per
    (sequence, value head), the call's KDA2RecurrentArgs by value."""

    SRC = ROOT / "tests" / "kernels" / "fused_check.cu"

    def __init__(self, torch, out_dir: Path, flags: tuple[str, ...] = ()):
        import ctypes

        from kda2.runtime import abi

        self.torch, self.ctypes, self.abi = torch, ctypes, abi
        get, ok, cu, self.unload = check_module(torch, self.SRC, out_dir, flags)
        self.ok, self.cu = ok, cu
        out = torch.zeros(1, dtype=torch.int32, device="cuda")
        self._launch(get("kda2_fused16_smem"), 1, 1, 0, ((out.data_ptr(),), (ctypes.c_void_p,)))
        torch.cuda.synchronize()
        self.smem = int(out.item())
        self.fns = {torch.bfloat16: get("kda2_fused16_bf16"), torch.float16: get("kda2_fused16_f16")}
        for fn in self.fns.values():
            ok(cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     self.smem), "cuFuncSetAttribute")

    def _launch(self, fn, grid: int, block: int, smem: int, args) -> None:
        stream = self.torch.cuda.current_stream().cuda_stream
        self.ok(self.cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, smem, stream, args, 0), "cuLaunchKernel")

    def __call__(self, q, k, v, g, beta, *, o, h0=None, ht=None, A_log=None, dt_bias=None, cu_seqlens=None,
                 scale=None, gate: str = "precomputed", lower_bound: float = -5.0, l2: bool = True, bsig: bool = True,
                 neg: bool = False, v_first: bool = False) -> None:
        """o (and ht) written in place; q, k [B, T, H, 128], v [B, T, HV, 128] 16-bit, g and beta fp32 or of q's dtype,
        A_log / dt_bias fp32."""
        torch, abi = self.torch, self.abi
        B, T, H, K = q.shape
        HV = v.shape[2]
        N = cu_seqlens.numel() - 1 if cu_seqlens is not None else B
        e16 = q.dtype
        flags = ((abi.FLAG_QK_L2NORM if l2 else 0) | (abi.FLAG_BETA_SIGMOID if bsig else 0)
                 | (abi.FLAG_NEG_EIGVAL if neg else 0) | (abi.FLAG_G_BF16 if g.dtype == e16 else 0)
                 | (abi.FLAG_BETA_BF16 if beta.dtype == e16 else 0) | (abi.FLAG_HAS_A_LOG if A_log is not None else 0)
                 | (abi.FLAG_HAS_DT_BIAS if dt_bias is not None else 0)
                 | (abi.FLAG_INPUT_FP16 if e16 == torch.float16 else 0))
        ptr = lambda x: 0 if x is None else x.data_ptr()  # noqa: E731
        mode = {name: code for code, name in abi.GATE_MODE_NAMES.items()}[gate]
        a = abi.KDA2RecurrentArgs(
            q=ptr(q), k=ptr(k), v=ptr(v), g=ptr(g), beta=ptr(beta), A_log=ptr(A_log), dt_bias=ptr(dt_bias), o=ptr(o),
            h0=ptr(h0), ht=ptr(ht), cu_seqlens=ptr(cu_seqlens), state_indices=0, N=N,
            T=T if cu_seqlens is None else B * T, H=H, HV=HV, scale=K ** -0.5 if scale is None else scale,
            lower_bound=lower_bound, gate_mode=mode, flags=flags, state_v_first=int(v_first), split=1, workspace=0,
            workspace_bytes=0, max_seqlen=T, intermediate=0)
        params = (self.ctypes.c_void_p * 1)(self.ctypes.addressof(a))
        self._launch(self.fns[e16], N * HV, 256, self.smem, self.ctypes.addressof(params))
