"""Shared-memory sizes of the `chunk` family's two kernels: one formula, used by the planner's budget
agent (with the strides the TIR pass is expected to pick) and by the TIR stage (with the strides it
picked). The kernel template (templates/chunk.cu.j2) lays its shared memory out by the same formulas.

Row strides are in elements (bf16 or fp32 as noted), padded so the tensor-core fragment loads are
free of bank conflicts (see kda2.tir.chunk):

    prep kernel:  3 bf16 tiles [64][lds_kv], gamma fp32 [64][lds_g], T fp32 [64][lds_t], 64 floats
    state kernel: per stage: w, qg, kg bf16 [64][lds_kv], Aqk bf16 [64][lds_a], u^T bf16
                  [block_v][lds_u], K floats (the chunk's last gate row); then one bf16 o staging tile
                  [64][lds_o] per warp (warps = block_v / 16)
"""
from __future__ import annotations

from typing import Mapping

CHUNK = 64             # tokens per chunk (the only chunk size the kernels implement)
PREP_THREADS = 256     # threads of the prep kernel: two warps per 16-row sub-chunk (= two per key channel at K=128)
LDS_T = 68             # fp32 [64][64] T tile (see kda2.tir.chunk for the fixed strides)
LDS_O = 24             # bf16 [64][16] per-warp o staging tile


def lds_g(k: int) -> int:
    """fp32 [64][K] gamma tile row stride (fixed, see kda2.tir.chunk)."""
    return k + 4


def expected_strides(k: int) -> dict[str, int]:
    """The strides the TIR bank pass picks for these tiles (ldmatrix rows padded by 16 bytes); the
    planner estimates with them, the TIR stage recomputes from what the pass really chose."""
    return {"lds_kv": k + 8, "lds_a": CHUNK + 8, "lds_u": CHUNK + 8, "lds_g": lds_g(k), "lds_t": LDS_T,
            "lds_o": LDS_O}


def state_threads(block_v: int) -> int:
    return block_v // 16 * 32


def prep_smem_bytes(s: Mapping[str, int]) -> int:
    return 3 * CHUNK * s["lds_kv"] * 2 + CHUNK * s["lds_g"] * 4 + CHUNK * s["lds_t"] * 4 + CHUNK * 4


def state_smem_bytes(s: Mapping[str, int], *, k: int, block_v: int, stages: int) -> int:
    per_stage = 3 * CHUNK * s["lds_kv"] * 2 + CHUNK * s["lds_a"] * 2 + block_v * s["lds_u"] * 2 + k * 4
    return stages * per_stage + (block_v // 16) * CHUNK * s["lds_o"] * 2
