"""TVMScript model of the `chunk` family's padded shared-memory tiles, for the `kda2.bank_pad` pass.

Two bf16 tiles of the chunk kernels (templates/chunk.cu.j2) are padded by the pass:

* ``kv``  bf16 [64][K]: the prep kernel's q, k and v tiles (one row stride for the three). Filled with
  16-byte cp.async copies, row-major over the tile; read by ldmatrix (the right-hand sides of w and u by
  ldmatrix.trans): each 8x8 phase reads 8 consecutive rows x 16 contiguous bytes at one column, for
  every 16-row block and 16-column k-step.
* ``ut``  bf16 [block_v][64]: u^T of a state CTA's V-slice, cp.async-filled; the state kernel's warps
  come in pairs (one per half of K), pair p reads its 16 rows as 32-bit mma fragment words
  u[16p + 8h + lane/4][16ks + 8c + 2*(lane%4)].

Unpadded, a bf16 row of 2K bytes (K = 64: 128 B, K = 128: 256 B) puts the 8 rows of an ldmatrix phase
(and the 8 rows of a fragment read) on the same 4 banks: 8-way conflicts. The pass pads rows by
multiples of 8 elements (the widest access, a 16-byte cp.async, must stay aligned) and keeps the
smallest pad that removes the conflicts: +8 (16 bytes shifts each row by 4 banks).

Not padded, so not modelled: the state kernel's w, qg, kg [64][K] and Aqk [64][64] arrive as whole
tiles by one linear bulk copy each (sm_90; cp.async pieces at the same offsets on sm_80), so a row pad
cannot exist there; the prep kernel stores them XOR-swizzled by row instead (16-byte piece ^= row % 8),
which makes the same ldmatrix phases conflict-free.

Fixed strides, not searched by the pass (the kernel's fp32 tiles; their access patterns mix a
column walk by the prep threads with mma accumulator-fragment reads that this model does not cover):

* gamma fp32 [64][K], stride K + 4: the per-column cumulative sum (thread d walks rows of column d:
  consecutive threads, consecutive words, conflict-free at any stride) and fragment reads
  [lane/4][2*(lane%4) + {0,1}]; +4 words moves each fragment row by 4 banks.
* T fp32 [64][64], stride 68: the same pattern at K = 64.
* o staging bf16 [32][16] per warp, stride 24 (48 bytes = 12 words): accumulator fragments written as
  32-bit words at [lane/4][2*(lane%4)] land on 8 distinct 4-bank groups (12r mod 32 for r < 8).

Only this module and the pass import TVM; import it lazily.
"""
import functools

import tvm  # noqa: F401  (TVMScript needs the package imported)
from tvm.script import tirx as T

from kda2.plan.smem import CHUNK

#: Name of the PrimFunc (and so of the kernel, were it compiled).
CHUNK_SYMBOL = "kda2_chunk_stage"

#: Access names (annotations of the outermost loop of each access), per modelled buffer.
ACCESSES = {"kv": ("kv_fill", "kv_ldmatrix"), "ut": ("ut_fill", "ut_frag")}
#: Buffer -> the plan key of its row stride.
STRIDE_KEYS = {"kv": "lds_kv", "ut": "lds_u"}


def geometry(k: int, block_v: int) -> dict:
    """The integers the model is built from (also what the tests recompute independently). Fills are
    modelled with the state CTA's threads (two warps per 16 value columns); a row-major 16-byte fill is
    row-contiguous at any thread count."""
    warps = 2 * (block_v // 16)
    nt = 32 * warps
    return {"K": k, "BV": block_v, "W": warps, "NT": nt, "C": CHUNK,
            "FILL_KV": -(-CHUNK * k // 8 // nt), "FILL_U": -(-block_v * CHUNK // 8 // nt)}


@functools.lru_cache(maxsize=64)
def chunk_staging_func(k: int, block_v: int) -> "tvm.tirx.PrimFunc":
    """PrimFunc modelling the padded shared tiles of a chunk variant (cached: PrimFuncs are immutable)."""
    g = geometry(k, block_v)
    K, BV, NT, C = g["K"], g["BV"], g["NT"], g["C"]
    FILL_KV, FILL_U = g["FILL_KV"], g["FILL_U"]
    KC, CC = K // 8, C // 8            # 16-byte chunks per row of kv, of ut
    KS, CS = K // 16, C // 16          # 16-column MMA k-steps over K, over the chunk
    MB = C // 16                       # 16-row blocks of a chunk
    model = {"family": "chunk", "k": K, "block_v": BV, "threads": NT, "chunk": C,
             "tiles": {"kv": [C, K], "ut": [BV, C]}}

    @T.prim_func
    def kda2_chunk_stage(kv_ptr: T.handle, u_ptr: T.handle):
        T.func_attr({"global_symbol": CHUNK_SYMBOL, "kda2.model": model})
        g_kv = T.match_buffer(kv_ptr, (C, K), "bfloat16")
        g_u = T.match_buffer(u_ptr, (BV, C), "bfloat16")
        T.device_entry()
        tx = T.thread_id([NT])
        kv = T.alloc_shared((C, K), "bfloat16")
        ut = T.alloc_shared((BV, C), "bfloat16")
        frag = T.alloc_local((8,), "bfloat16")
        # cp.async fills: 16-byte chunks, row-major over each tile, all threads
        for it in T.serial(FILL_KV, annotations={"kda2.access": "kv_fill"}):
            if it * NT + tx < C * KC:
                for e in T.vectorized(8):
                    kv[(it * NT + tx) // KC, (it * NT + tx) % KC * 8 + e] = g_kv[
                        (it * NT + tx) // KC, (it * NT + tx) % KC * 8 + e]
        for it in T.serial(FILL_U, annotations={"kda2.access": "ut_fill"}):
            if it * NT + tx < BV * CC:
                for e in T.vectorized(8):
                    ut[(it * NT + tx) // CC, (it * NT + tx) % CC * 8 + e] = g_u[
                        (it * NT + tx) // CC, (it * NT + tx) % CC * 8 + e]
        T.cuda.cta_sync()
        # ldmatrix.x4 of a 16x16 operand: lanes 0-7 / 8-15 address rows 0-7 / 8-15 at column +0,
        # lanes 16-31 the same rows at column +8; one 8-lane phase = 8 rows x 16 bytes
        for mb in T.serial(MB, annotations={"kda2.access": "kv_ldmatrix"}):
            for ks in T.serial(KS):
                for e in T.vectorized(8):
                    frag[e] = kv[mb * 16 + tx % 8 + tx % 32 // 8 % 2 * 8, ks * 16 + tx % 32 // 16 * 8 + e]
        # mma fragment words of the warp pair's own 16 rows of u^T: [lane/4 (+8)][2*(lane%4) (+8)]
        for ks in T.serial(CS, annotations={"kda2.access": "ut_frag"}):
            for h in T.serial(2):
                for c in T.serial(2):
                    for e in T.vectorized(2):
                        frag[e] = ut[tx // 64 * 16 + h * 8 + tx % 32 // 4, ks * 16 + c * 8 + tx % 4 * 2 + e]

    return kda2_chunk_stage
