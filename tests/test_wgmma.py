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


@pytest.mark.compile
def test_wgmma_check_kernel_compiles_to_hgmma(tmp_path):
    from kda2.compile.sass import sass_opcodes
    from kda2.compile.toolchain import _which_nvcc

    cubin = tmp_path / "wgmma_check.cubin"
    proc = subprocess.run([_which_nvcc(), "-cubin", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
                           f"-I{ROOT / 'src/kda2/codegen/include'}", "-o", str(cubin),
                           str(ROOT / "tests/kernels/wgmma_check.cu")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    spills = [ln for ln in proc.stderr.splitlines() if "bytes spill stores" in ln]
    assert len(spills) == 7 and all(" 0 bytes spill stores, 0 bytes spill loads" in ln for ln in spills), spills
    assert "serializ" not in proc.stderr.lower(), proc.stderr  # ptxas warns when it serialises wgmma
    ops = sass_opcodes(cubin)
    # 4 K-major entries x 8 k-steps and 3 N-major ones x 4 of m64nNk16, one fence / arrive per entry
    assert sum(v for op, v in ops.items() if op.startswith("HGMMA.64")) == 4 * 8 + 3 * 4, ops
    assert ops.get("WARPGROUP.ARRIVE") == 7 and not any(op.split(".")[0] in ("LDL", "STL") for op in ops), ops
