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
        cap = "".join(map(str, torch.cuda.get_device_capability()))
        pytest.skip(f"wgmma needs sm_90a (a Hopper GPU); this GPU is sm_{cap}")
    from kda2.compile.toolchain import _which_nvcc

    cubin = Path(out_dir) / f"{src.stem}.cubin"
    # flags before the repository's headers: an -I there overrides them (an experiment's other form of a header)
    proc = subprocess.run([_which_nvcc(), "-cubin", "-O3", "-gencode=arch=compute_90a,code=sm_90a", *flags,
                           f"-I{INCLUDE}", "-o", str(cubin), str(src)], capture_output=True, text=True)
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
        out = torch.zeros(2, dtype=torch.int32, device="cuda")
        self._launch(get("kda2_fused16_shape"), 1, 1, 0, ((out.data_ptr(),), (ctypes.c_void_p,)))
        torch.cuda.synchronize()
        self.smem, self.threads = (int(x) for x in out.tolist())
        self.fns = {torch.bfloat16: get("kda2_fused16_bf16"), torch.float16: get("kda2_fused16_f16")}
        for fn in self.fns.values():
            ok(cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     self.smem), "cuFuncSetAttribute")

    def _launch(self, fn, grid: int, block: int, smem: int, args) -> None:
        stream = self.torch.cuda.current_stream().cuda_stream
        self.ok(self.cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, smem, stream, args, 0), "cuLaunchKernel")

    def __call__(self, q, k, v, g, beta, **kw) -> None:
        """o (and ht) written in place; q, k [B, T, H, 128], v [B, T, HV, 128] 16-bit, g and beta fp32 or of q's dtype,
        A_log / dt_bias fp32 (the keywords of `args`)."""
        a = self.args(q, k, v, g, beta, **kw)
        params = (self.ctypes.c_void_p * 1)(self.ctypes.addressof(a))
        self._launch(self.fns[q.dtype], a.N * a.HV, self.threads, self.smem, self.ctypes.addressof(params))

    def args(self, q, k, v, g, beta, *, o, h0=None, ht=None, A_log=None, dt_bias=None, cu_seqlens=None,
             scale=None, gate: str = "precomputed", lower_bound: float = -5.0, l2: bool = True, bsig: bool = True,
             neg: bool = False, v_first: bool = False):
        """The call's KDA2RecurrentArgs (unsplit, no workspace; max_seqlen the padded length T)."""
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
        return a

    def split_call(self, *args, **kw) -> None:
        """The exact split composed from this kernel (exact_split below); same arguments as a call, plus `split`."""
        exact_split(self.torch, self, *args, **kw)


def exact_split(torch, run, q, k, v, g, beta, *, o, split: int, h0=None, ht=None, cu_seqlens=None,
                v_first: bool = False, **kw) -> None:
    """The exact split (docs/DESIGN.md §1) composed from a kernel call `run` (Fused16's signature), as the library's
    FOLD / combine / EMIT do it: each sequence cut by kda2.reference.split.split_plan (whole 64-token chunks, data-
    independent); each segment's transition S ↦ M S + B in two launches over all segments — M the segment run from
    S = I with v = 0 (u = T̃ v = 0, so the recurrence is linear in S; needs K = V), B the segment run from 0; the true
    start states chained in fp32 (one batched product per segment index); then every segment from its start state.
    Exact up to rounding; the cost does not depend on the data (three passes of the factors)."""
    from kda2.reference.split import split_plan

    B, T, _, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if K != V:
        raise ValueError(f"the composed split needs K = V (M runs as a K × K state); got K {K}, V {V}")
    cu = list(range(0, B * T + 1, T)) if cu_seqlens is None else [int(x) for x in cu_seqlens.tolist()]
    N = len(cu) - 1
    plan = split_plan([b - a for a, b in zip(cu, cu[1:])], split)
    table = plan.table()                       # (n, start, end) per segment, relative to the sequence's start
    nseg = len(table)
    dev = q.device
    S = torch.zeros(N, HV, K, V, device=dev) if h0 is None else (
        h0.transpose(-1, -2).contiguous() if v_first else h0.clone())
    if nseg:
        bounds = [cu[int(table[0][0])]] + [cu[int(n)] + int(e) for n, _, e in table]
        assert all(cu[int(n)] + int(a) == bounds[j] for j, (n, a, _) in enumerate(table)), "segments are contiguous"
        seg_cu = torch.tensor(bounds, dtype=torch.int64, device=dev)

        def flat(x):
            return x.reshape(1, B * T, *x.shape[2:])
        qf, kf, vf, gf, bf = flat(q), flat(k), flat(v), flat(g), flat(beta)
        scratch = torch.empty_like(vf)
        eye = torch.eye(K, device=dev).expand(nseg, HV, K, K).contiguous()
        M = torch.empty(nseg, HV, K, K, device=dev)
        Bt = torch.empty(nseg, HV, K, V, device=dev)
        run(qf, kf, torch.zeros_like(vf), gf, bf, o=scratch, h0=eye, ht=M, cu_seqlens=seg_cu, **kw)
        run(qf, kf, vf, gf, bf, o=scratch, h0=None, ht=Bt, cu_seqlens=seg_cu, **kw)
        off = plan.seg_offsets
        starts = torch.empty(nseg, HV, K, V, device=dev)
        for j in range(max(plan.num_segments)):   # the j-th segment of every sequence that has one, batched
            seqs = [n for n in range(N) if plan.num_segments[n] > j]
            ii = torch.tensor([int(off[n]) + j for n in seqs], device=dev)
            nn = torch.tensor(seqs, device=dev)
            starts[ii] = S[nn]
            S[nn] = torch.baddbmm(Bt[ii].reshape(-1, K, V), M[ii].reshape(-1, K, K),
                                  S[nn].reshape(-1, K, V)).reshape(len(seqs), HV, K, V)
        finals = torch.empty(nseg, HV, K, V, device=dev)
        run(qf, kf, vf, gf, bf, o=flat(o), h0=starts, ht=finals, cu_seqlens=seg_cu, **kw)
        last = [n for n in range(N) if plan.num_segments[n]]
        S[torch.tensor(last, device=dev)] = finals[torch.tensor([int(off[n + 1]) - 1 for n in last], device=dev)]
    if ht is not None:
        ht.copy_(S.transpose(-1, -2) if v_first else S)
