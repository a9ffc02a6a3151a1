"""kda2/wgmma.cuh compiles for sm_90a into warpgroup MMAs (HGMMA), with no local memory, through the
one-warpgroup check kernel (tests/kernels/wgmma_check.cu; tests/gpu/test_wgmma_gpu.py runs it). The panel
layout's index map is checked here against its definition."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def panel128_offset(row: int, k: int, rows: int) -> int:
    """The header's map, restated from its definition: 64-k panels, 128-byte rows, 16-byte pieces ^ row % 8."""
    panel, kk = divmod(k, 64)
    piece, e = divmod(kk, 8)
    return panel * rows * 64 + row * 64 + (piece ^ (row % 8)) * 8 + e


def test_panel_layout_is_a_permutation_within_each_8_row_group():
    """Every (row, k) of a 128 × 128 tile lands on its own slot, inside its panel's 8-row group (1024 B), and the
    8 rows of a group put the same k-piece on 8 different 16-byte bank groups (what the swizzle is for)."""
    rows, cols = 128, 128
    seen = {panel128_offset(r, k, rows) for r in range(rows) for k in range(cols)}
    assert seen == set(range(rows * cols))
    for r in range(rows):
        for k in range(cols):
            off = panel128_offset(r, k, rows)
            assert off // 512 == (k // 64) * (rows // 8) + r // 8  # 512 elements = one 1024-byte group
    for k in range(0, cols, 8):
        assert len({panel128_offset(r, k, rows) % 64 // 8 for r in range(8)}) == 8


def compile_sm90a(src: Path, tmp_path: Path, entries: int | None = None) -> dict[str, int]:
    """`src` compiled for sm_90a with kda2's headers: its SASS opcode counts, after checking that every entry (ptxas
    -v reports one spill line each; `entries` of them where given) uses no local memory and that ptxas serialised no
    wgmma (it warns when it does)."""
    from kda2.codegen.render import INCLUDE_DIR
    from kda2.compile.sass import sass_opcodes
    from kda2.compile.toolchain import _which_nvcc

    cubin = tmp_path / f"{src.stem}.cubin"
    proc = subprocess.run([_which_nvcc(), "-cubin", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
                           f"-I{INCLUDE_DIR}", "-o", str(cubin), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    spills = [ln for ln in proc.stderr.splitlines() if "bytes spill stores" in ln]
    assert spills and (entries is None or len(spills) == entries), spills
    assert all(" 0 bytes spill stores, 0 bytes spill loads" in ln for ln in spills), spills
    assert "serializ" not in proc.stderr.lower(), proc.stderr
    ops = sass_opcodes(cubin)
    assert not any(op.split(".")[0] in ("LDL", "STL") for op in ops), ops
    return ops


@pytest.mark.compile
def test_wgmma_check_kernel_compiles_to_hgmma(tmp_path):
    ops = compile_sm90a(ROOT / "tests/kernels/wgmma_check.cu", tmp_path, entries=7)
    # 4 K-major entries x 8 k-steps and 3 N-major ones x 4 of m64nNk16, one fence / arrive per entry
    assert sum(v for op, v in ops.items() if op.startswith("HGMMA.64")) == 4 * 8 + 3 * 4, ops
    assert ops.get("WARPGROUP.ARRIVE") == 7 and not any(op.split(".")[0] in ("LDL", "STL") for op in ops), ops


def test_only_arch_feature_variants_skip_the_lto_link():
    from kda2.compile.nvcc import uses_arch_features

    assert uses_arch_features({"family": "chunk", "state_mma": "wgmma"})
    assert not uses_arch_features({"family": "chunk", "state_mma": "mma_sync"})
    assert not uses_arch_features({"family": "chunk"}) and not uses_arch_features({"family": "recurrent"})


@pytest.mark.compile
def test_wgmma_chunk_variant_builds_through_ptxas_not_the_lto_link(tmp_path):
    """A planned wgmma variant of the real chunk spec: compiled to PTX for sm_90a and assembled by ptxas, its state
    kernel holds HGMMA, no local memory, and ptxas's report parses; through nvlink -dlto the same source fails on
    the wgmma instructions (the reason for the other path: if a toolkit stops failing here, drop it)."""
    from kda2.codegen.render import INCLUDE_DIR, render_variant
    from kda2.compile.nvcc import ToolError, compile_device, device_link
    from kda2.compile.ptxas import parse_ptxas
    from kda2.compile.sass import sass_opcodes
    from kda2.compile.toolchain import find_toolchain
    from kda2.plan.planner import plan_spec
    from kda2.spec.model import load_spec
    from kda2.spec.rules import load_rules
    from kda2.tir import plan_variant

    plan = plan_spec(load_spec(ROOT / "kernel_specs/kimi_linear_chunk.yaml"), "sm_90a", load_rules(ROOT / "rules"))
    cfg = next(v.config for v in plan.variants if v.config.get("state_mma") == "wgmma" and v.config["block_v"] == 64)
    src = tmp_path / "k.cu"
    src.write_text(render_variant(cfg, plan_variant(cfg, 232448)))
    tc = find_toolchain()
    ptx, cubin, log = tmp_path / "k.o", tmp_path / "k.cubin", tmp_path / "k.ptxas.log"
    compile_device(tc, src, ptx, arch="sm_90a", flags=[], include_dirs=[INCLUDE_DIR], lto=False)
    assert ".target sm_90a" in ptx.read_text()
    device_link(tc, ptx, cubin, log, arch="sm_90a", flags=[], nvvm_dir=tc.nvvm_dir(tmp_path), lto=False)
    res = parse_ptxas(log.read_text())
    state = next(r for name, r in res.items() if name.startswith("kda2_chunk_state_"))
    assert state["registers"] > 0 and all(r["spill_stores"] == 0 and r["stack"] == 0 for r in res.values()), res
    ops = sass_opcodes(cubin)
    assert any(op.startswith("HGMMA") for op in ops) and not any(op.split(".")[0] in ("LDL", "STL") for op in ops)
    lto = tmp_path / "k.lto.o"
    compile_device(tc, src, lto, arch="sm_90a", flags=[], include_dirs=[INCLUDE_DIR])
    with pytest.raises(ToolError, match="not supported on .target 'sm_90'"):
        device_link(tc, lto, tmp_path / "k2.cubin", tmp_path / "k2.log", arch="sm_90a", flags=[],
                    nvvm_dir=tc.nvvm_dir(tmp_path))


def test_roundings_are_the_gpus():
    """bf16 rounds to nearest even, tf32 operands half away from zero (kda2/mma.cuh tf32_operand), fp16 as IEEE."""
    import numpy as np

    from kda2.reference.rounding import bf16, fp16, tf32

    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-9, 65504.0 * 2], dtype=np.float32)
    assert bf16(x).tolist()[:4] == [1.0, 1 + 2**-6, -1.0, 1.0] and np.isfinite(bf16(x)[4])
    assert tf32(np.array([1 + 2**-11, -(1 + 2**-11), 1 + 2**-12], np.float32)).tolist() == [1 + 2**-10, -(1 + 2**-10), 1.0]
    assert fp16(np.array([65504.0 * 2], np.float32))[0] == np.inf   # fp16's range, the reason the diagonal is tf32


@pytest.mark.parametrize("C", [64, 128])
def test_blocked_substitution_model_solves_the_chunk(C):
    """The rounding order bfs_check.cu implements (16-bit K' products, tf32 diagonal product) solves the chunk's
    triangular system to within 16-bit rounding, and better than the all-16-bit order (the reason for the mix:
    experiments/2026-12-05-prep-numerics)."""
    import numpy as np

    from kda2.reference.rounding import bf16, bfs_chunk, bfs_system

    Kp, Td, beta, X, Y = bfs_system(7, C)
    rel = lambda y: float(np.linalg.norm(y - Y) / np.linalg.norm(Y))
    mixed, all16 = rel(bfs_chunk(Kp, Td, beta, X)), rel(bfs_chunk(Kp, Td, beta, X, op_t=bf16))
    assert mixed < 1e-3 and all16 < 5e-3 and mixed < all16 / 2, (mixed, all16)
    # the off-diagonal products matter: without them the "solution" is off by 5-10 % (unit keys in C dimensions are
    # nearly orthogonal), some 500 times the tolerance the GPU test holds the kernel to against this model
    assert rel(np.concatenate([(Td[16 * i:16 * i + 16] * beta[16 * i:16 * i + 16]) @ X[16 * i:16 * i + 16]
                               for i in range(4)])) > 0.05


@pytest.mark.compile
def test_bfs_check_kernel_compiles_to_hgmma_and_tf32_mma(tmp_path):
    """tests/kernels/bfs_check.cu (kda2/bfs.cuh bfs_solve): per entry of C channels, Σ_I (I + 1)·(C/64) register-A
    m64n16k16 wgmmas (the identity seeding X_Iᵀ, the K' products) and 4·2·(C/64)·2 tf32 m16n8k8 (the diagonal
    products), no local memory."""
    ops = compile_sm90a(ROOT / "tests/kernels/bfs_check.cu", tmp_path, entries=3)
    tiles = 2 + 2 + 1   # C = 128 (bf16, fp16), C = 64
    assert sum(v for op, v in ops.items() if op.startswith("HGMMA.64")) == 10 * tiles, ops
    assert ops.get("HMMA.1688.F32.TF32") == 16 * tiles, ops


@pytest.mark.compile
def test_fused_check_kernel_compiles_to_hgmma_without_local_memory(tmp_path):
    """tests/kernels/fused_check.cu (kda2/fused.cuh Fused16, the fused 16-token chunk forward) for both input dtypes:
    per 16-token step and warpgroup, 8 + 8 m64n16k16 wgmmas with Sᵀ's packed accumulators as register A (R = vᵀ −
    Sᵀ(k 2^Γ)ᵀ, oᵀ = Sᵀqgᵀ), two m64n16k8 tf32 ones with R's accumulators as A (v_newᵀ = R T̃ᵀ), one register-A m64n16k16 for
    oᵀ += v_newᵀ Aqkᵀ and one m64n128k16 for Sᵀ += v_newᵀ kg; the factors on tf32 mma.sync (2 × 2 × 2 for A / Aqk;
    no w or u); no local memory at two CTAs an SM (the state stays in registers)."""
    ops = compile_sm90a(ROOT / "tests/kernels/fused_check.cu", tmp_path, entries=3)
    assert sum(v for op, v in ops.items() if op.startswith("HGMMA.64")) == 2 * (8 + 8 + 2 + 1 + 1), ops
    assert ops.get("HMMA.1688.F32.TF32") == 2 * 8, ops


@pytest.mark.compile
@pytest.mark.parametrize("k", [64, 128, 256])
def test_bfs_prep_variants_compile_without_spills(k, tmp_path):
    """A rendered prep_wu bfs chunk variant at each head dim (kda2/chunk.cuh prep_wu_bfs: the panels and the u
    staging in the Γ tile, static_asserts) compiles for sm_90a with no local memory in any entry, and its prep issues
    the substitution's wgmmas: Σ_I (I + 1) per 64 channels, per warpgroup, per prep entry (one input dtype)."""
    from kda2.codegen.render import render_variant
    from kda2.tir.plan import plan_variant

    cfg = {"family": "chunk", "arch": "sm_90a", "k": k, "v": k, "state_layout": "k_first", "chunk": 64,
           "block_v": 32 if k < 256 else 16, "stages": 2 if k < 256 else 1, "gate_modes": ["softplus"],
           "dtypes": ["bf16"], "prep_wu": "bfs"}
    src = tmp_path / "bfs_variant.cu"
    src.write_text(render_variant(cfg, plan_variant(cfg, 232448)))
    ops = compile_sm90a(src, tmp_path)
    assert sum(v for op, v in ops.items() if op.startswith("HGMMA.64")) == 10 * (k // 64), ops
