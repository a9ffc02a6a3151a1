"""kda2/wgmma.cuh on the GPU (sm_90a): the warpgroup MMA wrappers the fused chunk kernel builds on, and the blocked
substitution of a chunk's w / u on them (tests/kernels/bfs_check.cu).

tests/kernels/wgmma_check.cu runs one warpgroup: D[64][N] = (accumulate ? D : 0) + A[64][128] · B[N][128]ᵀ (B
K-major, smem_desc_k128) or A[64][64] · B[64][N] (B N-major, smem_desc_mn128), A fragments from registers, B in
shared memory in the 128-byte-swizzled panel layout (panel128_offset). Compared with the fp64 product of the same 16-bit inputs on fresh random data; D is poisoned
with NaN before a plain run, so an element the accumulator layout misses shows up. Needs a Hopper GPU and nvcc
(the kernel is compiled here, with the -gencode form sm_90a needs); skips without a GPU (conftest.py).
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
from _check_kernels import check_module

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "tests" / "kernels" / "wgmma_check.cu"


@pytest.fixture(scope="module")
def wgmma(torch_cuda, tmp_path_factory):
    """The wgmma_check.cu kernels: (function lookup, checked-call helper, driver module)."""
    get, ok, cu, unload = check_module(torch_cuda, SRC, tmp_path_factory.mktemp("wgmma"))
    yield get, ok, cu
    unload()


@pytest.fixture(scope="module")
def bfs(torch_cuda, tmp_path_factory):
    """The bfs_check.cu kernels: (function lookup, checked-call helper, driver module)."""
    get, ok, cu, unload = check_module(torch_cuda, ROOT / "tests" / "kernels" / "bfs_check.cu",
                                       tmp_path_factory.mktemp("bfs"))
    yield get, ok, cu
    unload()


@pytest.mark.parametrize("accumulate", [False, True], ids=["set", "accumulate"])
@pytest.mark.parametrize("kernel", ["bf16_n64", "bf16_n128", "f16_n64", "f16_n128", "bf16_n64_t", "bf16_n128_t",
                                    "f16_n128_t"])
def test_wgmma_matches_fp64(wgmma, torch_cuda, kernel: str, accumulate: bool):
    torch = torch_cuda
    get, ok, cu = wgmma
    fn = get(f"kda2_wgmma_check_{kernel}")
    dtype, n, trans = kernel.split("_")[0], int(kernel.split("_")[1][1:]), kernel.endswith("_t")
    k = 64 if trans else 128
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
    gen = torch.Generator(device="cuda").manual_seed(1000 * n + 10 * trans + accumulate + (dtype == "f16") * 7)
    a = torch.randn(64, k, generator=gen, device="cuda").to(tdt)
    b = torch.randn(*((k, n) if trans else (n, k)), generator=gen, device="cuda").to(tdt)
    c = torch.randn(64, n, generator=gen, device="cuda")
    d = c.clone() if accumulate else torch.full((64, n), float("nan"), device="cuda")
    args = ((a.data_ptr(), b.data_ptr(), d.data_ptr(), int(accumulate)),
            (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int))
    stream = torch.cuda.current_stream().cuda_stream
    ok(cu.cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, 0, stream, args, 0), "cuLaunchKernel")
    ok(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
    ref = a.double() @ (b.double() if trans else b.double().T) + (c.double() if accumulate else 0)
    assert bool(torch.isfinite(d).all()), f"{kernel}: {int((~torch.isfinite(d)).sum())} elements not written"
    rel = (torch.linalg.vector_norm(d.double() - ref) / torch.linalg.vector_norm(ref)).item()
    # fp32 accumulation of exact 16-bit products (plus C): rounding only, ~1e-7 relative
    assert rel < 1e-5, f"{kernel} accumulate={accumulate}: relative L2 {rel:.3e} vs the fp64 product"
    # a wrong swizzle or fragment map permutes whole rows or columns: every element, not just the norm
    worst = (d.double() - ref).abs().max().item()
    assert worst < 1e-3 * ref.abs().max().item(), f"{kernel}: max abs error {worst:.3e}"


@pytest.mark.parametrize("kernel", ["bf16_c128", "f16_c128", "bf16_c64"])
@pytest.mark.parametrize("seed", [11, 12])
def test_blocked_substitution_matches_its_rounding_model_and_fp64(bfs, torch_cuda, kernel: str, seed: int):
    """One warpgroup solves a chunk's (I + diag β K') Y = diag β X by blocked substitution (bfs_check.cu, the prep's
    kda2/bfs.cuh bfs_solve): register-A m64n16k16 wgmmas on 16-bit swizzled panels (an identity seeding X_Iᵀ, K' subtracted),
    then tf32 mma.sync fed from the wgmma accumulators in permuted k order. Held to the numpy model of the same rounding order (kda2.reference.rounding.bfs_chunk) tightly — a wrong
    panel swizzle, fragment map or k permutation moves Y by the off-diagonal coupling, 5-10 %, or leaves NaN — and
    to the fp64 solve at 16-bit rounding level (Y is returned rounded to the input dtype, as the prep stages it)."""
    import numpy as np

    from kda2.reference.rounding import bf16, bfs_chunk, bfs_system, fp16

    torch = torch_cuda
    get, ok, cu = bfs
    fn = get(f"kda2_bfs_check_{kernel}")
    e16 = bf16 if kernel.startswith("bf16") else fp16
    C = int(kernel.split("_c")[1])
    Kp, Td, beta, X, Y = bfs_system(seed, C, e16)
    dev = lambda a, dt=torch.float32: torch.from_numpy(np.ascontiguousarray(a)).to("cuda", dt)  # noqa: E731
    t_kp, t_td, t_b = dev(Kp), dev(Td), dev(beta)
    t_x = dev(X, torch.bfloat16 if e16 is bf16 else torch.float16)
    y = torch.full((64, C), float("nan"), device="cuda")
    args = ((t_kp.data_ptr(), t_td.data_ptr(), t_b.data_ptr(), t_x.data_ptr(), y.data_ptr()),
            (ctypes.c_void_p,) * 5)
    stream = torch.cuda.current_stream().cuda_stream
    ok(cu.cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, 0, stream, args, 0), "cuLaunchKernel")
    ok(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
    got = y.double().cpu().numpy()
    assert np.isfinite(got).all(), f"{kernel}: {int((~np.isfinite(got)).sum())} elements not written"
    # Y as the prep stores it: rounded to the input dtype (an fp32 difference of accumulation order can flip a rare
    # element by one 16-bit step: far below the bound, far above it for a layout error)
    model = e16(bfs_chunk(Kp.astype(np.float32), Td.astype(np.float32), beta.astype(np.float32), X.astype(np.float32),
                          op_k=e16)).astype(np.float64)
    rel = lambda a, b: float(np.linalg.norm(a - b) / np.linalg.norm(b))  # noqa: E731
    assert rel(got, model) < 2e-4, f"{kernel} seed {seed}: relative L2 {rel(got, model):.3e} vs its rounding model"
    assert rel(got, Y) < 3e-3, f"{kernel} seed {seed}: relative L2 {rel(got, Y):.3e} vs the fp64 solve"
