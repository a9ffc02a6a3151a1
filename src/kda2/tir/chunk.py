"""TVMScript model of the `chunk` family's shared-memory tiles, for the `kda2.bank_pad` pass.

The state kernel of a chunk variant (templates/chunk.cu.j2) has W = block_v / 16 warps. Per chunk it
stages, with 16-byte cp.async copies (row-major over the tile, every thread):

* ``kv``  bf16 [64][K]: stands for w, qg and kg (and the prep kernel's q / k tiles), which share one
  row stride. Read by ldmatrix (x4, or .trans for kg^T): each 8x8 phase reads 8 consecutive rows x 16
  contiguous bytes at one column, for every 16-row block and 16-column k-step.
* ``a``   bf16 [64][64]: the masked Aqk tile, read by ldmatrix the same way.
* ``ut``  bf16 [block_v][64]: u^T of the CTA's V-slice; warp w reads its 16 rows as 32-bit mma
  fragment words u[16w + 8h + lane/4][16ks + 8c + 2*(lane%4)].

Unpadded, a bf16 row of 2K bytes (K = 64: 128 B, K = 128: 256 B) puts the 8 rows of an ldmatrix phase
(and the 8 rows of a fragment read) on the same 4 banks: 8-way conflicts. The pass pads rows by
multiples of 8 elements (the widest access, a 16-byte cp.async, must stay aligned) and keeps the
smallest pad that removes the conflicts: +8 (16 bytes shifts each row by 4 banks).

Fixed strides, not searched by the pass (the kernel's fp32 tiles; their access patterns mix a
column walk by the prep threads with mma accumulator-fragment reads that this model does not cover):

* gamma fp32 [64][K], stride K + 4: the per-column cumulative sum (thread d walks rows of column d:
  consecutive threads, consecutive words, conflict-free at any stride) and fragment reads
  [lane/4][2*(lane%4) + {0,1}]; +4 words moves each fragment row by 4 banks.
* T fp32 [64][64], stride 68: the same pattern at K = 64.
* o staging bf16 [64][16] per warp, stride 24 (48 bytes = 12 words): accumulator fragments written as
  32-bit words at [lane/4][2*(lane%4)] land on 8 distinct 4-bank groups (12r mod 32 for r < 8).

Only this module and the pass import TVM; import it lazily.
"""
import functools

import tvm  # noqa: F401  (TVMScript needs the package imported)
from tvm.script import tirx as T

from kda2.chunk_smem import CHUNK

#: Name of the PrimFunc (and so of the kernel, were it compiled).
CHUNK_SYMBOL = "kda2_chunk_stage"

#: Access names (annotations of the outermost loop of each access), per modelled buffer.
ACCESSES = {"kv": ("kv_fill", "kv_ldmatrix"), "a": ("a_fill", "a_ldmatrix"), "ut": ("ut_fill", "ut_frag")}
#: Buffer -> the plan key of its row stride.
STRIDE_KEYS = {"kv": "lds_kv", "a": "lds_a", "ut": "lds_u"}


def geometry(k: int, block_v: int) -> dict:
    """The integers the model is built from (also what the tests recompute independently)."""
    warps = block_v // 16
    nt = 32 * warps
    return {"K": k, "BV": block_v, "W": warps, "NT": nt, "C": CHUNK,
            "FILL_KV": -(-CHUNK * k // 8 // nt), "FILL_A": -(-CHUNK * CHUNK // 8 // nt),
            "FILL_U": -(-block_v * CHUNK // 8 // nt)}


@functools.lru_cache(maxsize=64)
def chunk_staging_func(k: int, block_v: int) -> "tvm.tirx.PrimFunc":
    """PrimFunc modelling the shared tiles of one state-kernel CTA (cached: PrimFuncs are immutable)."""
    g = geometry(k, block_v)
    K, BV, NT, C = g["K"], g["BV"], g["NT"], g["C"]
    FILL_KV, FILL_A, FILL_U = g["FILL_KV"], g["FILL_A"], g["FILL_U"]
    KC, CC = K // 8, C // 8            # 16-byte chunks per row of kv, of a / ut
    KS, CS = K // 16, C // 16          # 16-column MMA k-steps over K, over the chunk
    MB = C // 16                       # 16-row blocks of a chunk
    model = {"family": "chunk", "k": K, "block_v": BV, "threads": NT, "chunk": C,
             "tiles": {"kv": [C, K], "a": [C, C], "ut": [BV, C]}}

    @T.prim_func
    def kda2_chunk_stage(kv_ptr: T.handle, a_ptr: T.handle, u_ptr: T.handle):
        T.func_attr({"global_symbol": CHUNK_SYMBOL, "kda2.model": model})
        g_kv = T.match_buffer(kv_ptr, (C, K), "bfloat16")
        g_a = T.match_buffer(a_ptr, (C, C), "bfloat16")
        g_u = T.match_buffer(u_ptr, (BV, C), "bfloat16")
        T.device_entry()
        tx = T.thread_id([NT])
        kv = T.alloc_shared((C, K), "bfloat16")
        a = T.alloc_shared((C, C), "bfloat16")
        ut = T.alloc_shared((BV, C), "bfloat16")
        frag = T.alloc_local((8,), "bfloat16")
        # cp.async fills: 16-byte chunks, row-major over each tile, all threads
        for it in T.serial(FILL_KV, annotations={"kda2.access": "kv_fill"}):
            if it * NT + tx < C * KC:
                for e in T.vectorized(8):
                    kv[(it * NT + tx) // KC, (it * NT + tx) % KC * 8 + e] = g_kv[
                        (it * NT + tx) // KC, (it * NT + tx) % KC * 8 + e]
        for it in T.serial(FILL_A, annotations={"kda2.access": "a_fill"}):
            if it * NT + tx < C * CC:
                for e in T.vectorized(8):
                    a[(it * NT + tx) // CC, (it * NT + tx) % CC * 8 + e] = g_a[
                        (it * NT + tx) // CC, (it * NT + tx) % CC * 8 + e]
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
        for mb in T.serial(MB, annotations={"kda2.access": "a_ldmatrix"}):
            for ks in T.serial(CS):
                for e in T.vectorized(8):
                    frag[e] = a[mb * 16 + tx % 8 + tx % 32 // 8 % 2 * 8, ks * 16 + tx % 32 // 16 * 8 + e]
        # mma fragment words of the warp's own 16 rows of u^T: [lane/4 (+8)][2*(lane%4) (+8)]
        for ks in T.serial(CS, annotations={"kda2.access": "ut_frag"}):
            for h in T.serial(2):
                for c in T.serial(2):
                    for e in T.vectorized(2):
                        frag[e] = ut[tx // 32 * 16 + h * 8 + tx % 32 // 4, ks * 16 + c * 8 + tx % 4 * 2 + e]

    return kda2_chunk_stage
