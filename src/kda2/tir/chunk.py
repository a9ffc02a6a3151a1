"""TVMScript model of every shared-memory tile of the `chunk` family, for the `kda2.bank_pad` pass.

Every shared tile of the three kernels (include/kda2/chunk.cuh: prep, state in its EMIT and FOLD passes,
combine) is declared once here with the accesses the kernel makes to it; the pass chooses its layout
(a row pad, or the XOR swizzle of 16-byte pieces by row for tiles that arrive by whole-tile copies) and
the plan hands the decision to the render (`LDS_*` strides, `SWZ_*` flags of the config struct), so the
kernel and this model cannot drift apart: there is no other source of those constants.

One PrimFunc models all three kernels with the state kernel's threads (`tx`, NT = 32 · warps). Accesses of
the 256-thread prep and combine kernels loop over their warps (`pw`) and use `tx % 32` as the lane: bank
conflicts are decided per warp, so a warp's lane pattern is what matters. Per tile (rows × columns,
element type; the kernel's name):

* ``kv``  bf16 [64][K] (prep sQ, sK, sV; the w staging): 16-byte cp.async fill (on sm_90 a tensor copy where the
  chosen row fits a box row — the plan's prep_tma, decided after this pass; the model keeps the cp.async fill, which
  sm_80 and K = 256 make); ldmatrix (and .trans) 8×8
  phases; mma fragment words [row lane/4][col 2·(lane%4)] of the A / Aqk products; l2norm and element-wise
  16-byte row pieces; w staging stores of accumulator fragments (stmatrix rows on sm_90). Pad.
* ``ut``  bf16 [V][64] (state sU, prep uᵀ staging): fill (16-byte pieces, 8 threads per 128-byte row; the wgmma
  pass fills each warp's own 16 rows the same way: the same phases); fragment words of v_new; the prep's 2-byte
  transposed staging stores (stmatrix .trans rows on sm_90). Pad.
* ``gamma`` fp32 [64][K] (prep Γ): 16-byte raw-gate fill; the per-channel scan (thread = channel); float2
  fragment reads of the A / Aqk factors; 16-byte element-wise reads. Pad.
* ``tmat`` fp32 [64][64] (prep A, then T): accumulator fragments of A (and the K halves' exchange); forward
  substitution (in place over A's diagonal blocks) and the 16-byte copy of its blocks into T; the block levels;
  16-byte row reads of T1 and T2 for their 16-bit copy. Pad.
* ``t16`` bf16 [64][64] (prep 16-bit T, over the A tile's dead rows 32..63): 8-byte row stores of the T1 / T2 copy,
  level 2's T21 fragment words; ldmatrix 8×8 phases of its 16×16 blocks for w and u. Pad.
* ``y``   fp32 [32][8] per warp (prep scratch of the block levels' tensor-core products): float2 accumulator stores,
  B-fragment reads. Pad.
* ``o``   bf16 [32][16] per warp (state o staging): 2-byte fragment stores, 16-byte row reads. Pad.
* ``xch`` fp32 [12·32][4] per warp (state partial sums for the partner): float4 per lane in fragment
  order, conflict-free by construction. Fixed.
* ``w``, ``qg`` bf16 [64][K], ``kg`` bf16 [64][K], ``aqk`` bf16 [64][64] (state tiles; one bulk copy each
  from the workspace, which the prep writes in the chosen layout): ldmatrix (kg: .trans); the wgmma state pass
  reads them by descriptor (which needs the xor layout) and stages o in w: stmatrix.trans 16-byte rows, 16-byte
  row reads (geometry WGW; no iterations in the mma_sync variants' models). Xor or plain.
* ``x``   fp32 [K][32] (combine's start-state slice): fill, float4 broadcast reads, row stores. Pad.

Only this module and the pass import TVM; import it lazily.
"""
import functools

import tvm  # noqa: F401  (TVMScript needs the package imported)
from tvm.script import tirx as T

from kda2.plan.smem import CHUNK, PREP_THREADS, combine_shape

#: Name of the PrimFunc (and so of the kernel, were it compiled).
CHUNK_SYMBOL = "kda2_chunk_stage"

#: Tile -> the plan key of its row stride (padded tiles) or of its swizzle flag (xor tiles).
STRIDE_KEYS = {"kv": "lds_kv", "ut": "lds_u", "gamma": "lds_g", "tmat": "lds_t", "t16": "lds_t16", "y": "lds_y", "o": "lds_o",
               "x": "lds_x"}
SWIZZLE_KEYS = {"w": "swz_w", "qg": "swz_qg", "kg": "swz_kg", "aqk": "swz_aqk"}
#: What the pass may do to each tile (bankpass.TRANSFORMS).
TRANSFORMS = {**{t: "pad" for t in STRIDE_KEYS}, **{t: "xor" for t in SWIZZLE_KEYS}, "xch": "fixed"}
PREP_WARPS = PREP_THREADS // 32   # the prep kernel's 256 threads


def geometry(k: int, v: int, block_v: int, mma: str = "mma_sync") -> dict:
    """The integers the model is built from (also what the tests recompute independently). WGW: warps of the wgmma
    state pass (state_mma wgmma: 4 per 64 value columns), 0 otherwise (its accesses then never run)."""
    warps = 2 * (block_v // 16)
    nt = 32 * warps
    return {"K": k, "V": v, "BV": block_v, "W": warps, "NT": nt, "C": CHUNK, "WGW": block_v // 16 if mma == "wgmma" else 0,
            "FILL_KV": -(-CHUNK * k // 8 // nt), "FILL_U": -(-block_v * CHUNK // 8 // nt)}


@functools.lru_cache(maxsize=64)
def chunk_staging_func(k: int, block_v: int, v: int = 128, mma: str = "mma_sync") -> "tvm.tirx.PrimFunc":
    """PrimFunc modelling the shared tiles of a chunk variant (cached: PrimFuncs are immutable)."""
    g = geometry(k, v, block_v, mma)
    WGW = g["WGW"]
    WGR = CHUNK * block_v // 8 // (32 * max(WGW, 1))   # 16-byte o pieces per thread of the wgmma pass
    K, V, BV, NT, C = g["K"], g["V"], g["BV"], g["NT"], g["C"]
    FILL_KV, FILL_U = g["FILL_KV"], g["FILL_U"]
    KC, CC = K // 8, C // 8            # 16-byte chunks per row of kv, of ut
    LN = KC // 2 if KC >= 16 else KC   # the l2norm's lanes per row
    KS, CS = K // 16, C // 16          # 16-column MMA k-steps over K, over the chunk
    MB = C // 16                       # 16-row blocks of a chunk
    KH = K // 2                        # key channels per warp of a state pair
    comb = combine_shape(K)
    PW, CW, XC = PREP_WARPS, comb["threads"] // 32, comb["cols"]
    PT = 32 * PW                       # prep threads
    SP = PT // K                       # gate scan: threads per key channel, each over SR rows
    SR = C // SP
    # step 6's split (chunk.cuh): RBG6 groups of row blocks, NRB6 row blocks and NPC6 16-column pieces per warp;
    # rb6(pw, j) the warp's j-th row block
    RBG6 = 1 if K // 16 >= 8 else 2
    NRB6, NPC6 = 4 // RBG6, K // 16 * RBG6 // PW

    def rb6(pw, j):
        return 3 - j if RBG6 == 1 else T.if_then_else(j == 0, 3 - pw // 4, pw // 4)

    def t16_copy_row(pw, tx, m):
        """The T1 / T2 row that lane tx % 32 of warp pw ≥ 4 copies in pass m (chunk.cuh step 5): r(q) + 16 m with
        q = 4 (pw − 4) + lane / 8 and r(q) = q / 2 % 4 + 4 (q % 2) + 8 (q / 8)."""
        q = (pw - 4) * 4 + tx % 32 // 8
        return q // 2 % 4 + q % 2 * 4 + q // 8 * 8 + 16 * m

    def diag_copy_row(pw, tx, m):
        """The row of the inverted diagonal blocks that lane tx % 32 of warp pw ≥ 4 copies in piece m (chunk.cuh
        diag_copy_row): idx = p + 128 m, p = 32 (pw − 4) + lane, quarter q = idx / 8: block q / 8, rows (q % 8) % 2 +
        4 ((q % 8) / 2), + 2 for the quarter's upper four lanes."""
        idx = (pw - 4) * 32 + tx % 32 + 128 * m
        return idx // 64 * 16 + idx // 8 % 2 + idx // 16 % 4 * 4 + idx // 4 % 2 * 2
    model = {"family": "chunk", "k": K, "v": V, "block_v": BV, "threads": NT, "chunk": C,
             "tiles": {"kv": [C, K], "ut": [V, C], "gamma": [C, K], "tmat": [C, C], "t16": [C, C], "y": [32, 8], "o": [C // 2, 16],
                       "xch": [12 * 32, 4], "w": [C, K], "qg": [C, K], "kg": [C, K], "aqk": [C, C], "x": [K, XC]}}

    @T.prim_func
    def kda2_chunk_stage(kv_ptr: T.handle, u_ptr: T.handle):
        T.func_attr({"global_symbol": CHUNK_SYMBOL, "kda2.model": model, "kda2.tiles": TRANSFORMS})
        g_kv = T.match_buffer(kv_ptr, (C, K), "bfloat16")
        g_u = T.match_buffer(u_ptr, (BV, C), "bfloat16")
        T.device_entry()
        tx = T.thread_id([NT])
        kv = T.alloc_shared((C, K), "bfloat16")
        ut = T.alloc_shared((V, C), "bfloat16")
        gamma = T.alloc_shared((C, K), "float32")
        tmat = T.alloc_shared((C, C), "float32")
        t16 = T.alloc_shared((C, C), "bfloat16")
        y = T.alloc_shared((32, 8), "float32")
        o = T.alloc_shared((C // 2, 16), "bfloat16")
        xch = T.alloc_shared((12 * 32, 4), "float32")
        w = T.alloc_shared((C, K), "bfloat16")
        qg = T.alloc_shared((C, K), "bfloat16")
        kg = T.alloc_shared((C, K), "bfloat16")
        aqk = T.alloc_shared((C, C), "bfloat16")
        x = T.alloc_shared((K, XC), "float32")
        frag = T.alloc_local((8,), "bfloat16")
        ffrag = T.alloc_local((4,), "float32")
        # ---- prep: q, k, v tiles ------------------------------------------------------------------
        for it in T.serial(FILL_KV, annotations={"kda2.access": "kv_fill"}):
            if it * NT + tx < C * KC:
                for e in T.vectorized(8):
                    kv[(it * NT + tx) // KC, (it * NT + tx) % KC * 8 + e] = g_kv[
                        (it * NT + tx) // KC, (it * NT + tx) % KC * 8 + e]
        # ldmatrix.x4 (and .trans) of a 16x16 operand: lanes 0-7 / 8-15 rows 0-7 / 8-15 at column +0,
        # lanes 16-31 the same rows at column +8; one 8-lane phase = 8 rows x 16 bytes
        for mb in T.serial(MB, annotations={"kda2.access": "kv_ldmatrix", "kda2.phase_lanes": 8}):
            for ks in T.serial(KS):
                for e in T.vectorized(8):
                    frag[e] = kv[mb * 16 + tx % 8 + tx % 32 // 8 % 2 * 8, ks * 16 + tx % 32 // 16 * 8 + e]
        # A / Aqk left factors: warp (I = pw % 4) reads rows 16I + lane/4 (+8), words 2*(lane%4) (+8); the warps
        # of pair 0 read rows 48.. too, for the two column tiles they take from pair 3 (chunk.cuh step 3)
        for pw in T.serial(PW, annotations={"kda2.access": "kv_frag_rows"}):
            for ks in T.serial(KS):
                for hr in T.serial(2):
                    for hc in T.serial(2):
                        for e in T.vectorized(2):
                            frag[e] = kv[pw % 4 * 16 + tx % 32 // 4 + hr * 8, ks * 16 + tx % 32 % 4 * 2 + hc * 8 + e]
                        if pw % 4 == 0:
                            for e in T.vectorized(2):
                                frag[e] = kv[48 + tx % 32 // 4 + hr * 8, ks * 16 + tx % 32 % 4 * 2 + hc * 8 + e]
        # right factors left of the diagonal: rows 8 * (part * I + nt) + lane/4, nt < I
        for pw in T.serial(PW, annotations={"kda2.access": "kv_frag_cols"}):
            for nt in T.serial(3):
                for ks in T.serial(KS):
                    for hc in T.serial(2):
                        if nt < pw % 4:
                            for e in T.vectorized(2):
                                frag[e] = kv[(pw // 4 * (pw % 4) + nt) * 8 + tx % 32 // 4,
                                             ks * 16 + tx % 32 % 4 * 2 + hc * 8 + e]
        # l2norm: LN lanes per row (KC, or KC / 2 from K = 128), a lane's 16-byte pieces s and s + LN (chunk.cuh 2a)
        for pw in T.serial(PW, annotations={"kda2.access": "kv_l2norm"}):
            for m in T.serial(C * LN // PT):
                for pp in T.serial(KC // LN):
                    for e in T.vectorized(8):
                        frag[e] = kv[(pw * 32 + tx % 32) // LN + m * (PT // LN), (tx % 32 % LN + pp * LN) * 8 + e]
        # element-wise pass and the w copy-out: item p = thread + 256 m, row p / (K/8), 16-byte piece
        for pw in T.serial(PW, annotations={"kda2.access": "kv_elementwise"}):
            for m in T.serial(C * K // 8 // PT):
                for e in T.vectorized(8):
                    kv[(pw * 32 + tx % 32 + m * PT) // KC, (pw * 32 + tx % 32 + m * PT) % KC * 8 + e] = frag[e]
        # w staging: accumulator fragments of rows 16 rb + lane/4 (+8) for the warp's row blocks rb, columns
        # 16 np0 + 8 nt + 2 (lane%4) of its pieces (chunk.cuh step 6: RBG groups of row blocks, NPC pieces a warp)
        for pw in T.serial(PW, annotations={"kda2.access": "kv_w_stage"}):
            for j in T.serial(NRB6):
                for nt in T.serial(2 * NPC6):
                    for h in T.serial(2):
                        for e in T.vectorized(2):
                            kv[rb6(pw, j) * 16 + tx % 32 // 4 + h * 8,
                               pw % (PW // RBG6) * NPC6 * 16 + nt * 8 + tx % 32 % 4 * 2 + e] = frag[e]
        # on sm_90 the same staging by stmatrix: lane 8 m + r stores 16 bytes, row r of quarter m (tokens 16 rb +
        # 8 (m % 2), columns 16 (np0 + np) + 8 (m / 2)); both paths are in the header, a build takes one by its arch
        for pw in T.serial(PW, annotations={"kda2.access": "kv_w_stsm"}):
            for j in T.serial(NRB6):
                for np_ in T.serial(NPC6):
                    for e in T.vectorized(8):
                        kv[rb6(pw, j) * 16 + tx % 32 // 8 % 2 * 8 + tx % 8,
                           (pw % (PW // RBG6) * NPC6 + np_) * 16 + tx % 32 // 16 * 8 + e] = frag[e]
        # ---- u^T: state fill and fragment words; prep staging (2-byte transposed stores, or stmatrix .trans on
        # sm_90), copy-out -----
        for it in T.serial(FILL_U, annotations={"kda2.access": "ut_fill"}):
            if it * NT + tx < BV * CC:
                for e in T.vectorized(8):
                    ut[(it * NT + tx) // CC, (it * NT + tx) % CC * 8 + e] = g_u[
                        (it * NT + tx) // CC, (it * NT + tx) % CC * 8 + e]
        for ks in T.serial(CS, annotations={"kda2.access": "ut_frag"}):
            for h in T.serial(2):
                for c in T.serial(2):
                    for e in T.vectorized(2):
                        frag[e] = ut[tx // 64 * 16 + h * 8 + tx % 32 // 4, ks * 16 + c * 8 + tx % 4 * 2 + e]
        for pw in T.serial(PW, annotations={"kda2.access": "ut_stage"}):
            for j in T.serial(NRB6):
                for nt in T.serial(2 * NPC6):
                    for c in T.serial(2):
                        for h in T.serial(2):
                            ut[pw % (PW // RBG6) * NPC6 * 16 + nt * 8 + tx % 32 % 4 * 2 + c,
                               rb6(pw, j) * 16 + tx % 32 // 4 + h * 8] = frag[0]
        for pw in T.serial(PW, annotations={"kda2.access": "ut_stsm"}):
            for j in T.serial(NRB6):
                for np_ in T.serial(NPC6):
                    for e in T.vectorized(8):
                        ut[(pw % (PW // RBG6) * NPC6 + np_) * 16 + tx % 32 // 16 * 8 + tx % 8,
                           rb6(pw, j) * 16 + tx % 32 // 8 % 2 * 8 + e] = frag[e]
        for pw in T.serial(PW, annotations={"kda2.access": "ut_copyout"}):
            for m in T.serial(V * C // 8 // PT):
                for e in T.vectorized(8):
                    frag[e] = ut[(pw * 32 + tx % 32 + m * PT) // CC, (pw * 32 + tx % 32 + m * PT) % CC * 8 + e]
        # ---- Γ: raw gate fill, per-channel scan, fragment and element-wise reads ------------------------
        for pw in T.serial(PW, annotations={"kda2.access": "g_fill"}):
            for m in T.serial(C * K // 4 // PT):
                for e in T.vectorized(4):
                    gamma[(pw * 32 + tx % 32 + m * PT) // (K // 4), (pw * 32 + tx % 32 + m * PT) % (K // 4) * 4 + e] = \
                        ffrag[e]
        for pw in T.serial(PW, annotations={"kda2.access": "g_scan"}):
            for e in T.serial(SR):
                gamma[(pw * 32 + tx % 32) // K * SR + e, (pw * 32 + tx % 32) % K] = ffrag[0]
        for pw in T.serial(PW, annotations={"kda2.access": "g_frag_rows"}):
            for ks in T.serial(KS):
                for hr in T.serial(2):
                    for hc in T.serial(2):
                        for e in T.vectorized(2):
                            ffrag[e] = gamma[pw % 4 * 16 + tx % 32 // 4 + hr * 8, ks * 16 + tx % 32 % 4 * 2 + hc * 8 + e]
                        if pw % 4 == 0:
                            for e in T.vectorized(2):
                                ffrag[e] = gamma[48 + tx % 32 // 4 + hr * 8, ks * 16 + tx % 32 % 4 * 2 + hc * 8 + e]
        for pw in T.serial(PW, annotations={"kda2.access": "g_frag_cols"}):
            for nt in T.serial(3):
                for ks in T.serial(KS):
                    for hc in T.serial(2):
                        if nt < pw % 4:
                            for e in T.vectorized(2):
                                ffrag[e] = gamma[(pw // 4 * (pw % 4) + nt) * 8 + tx % 32 // 4,
                                              ks * 16 + tx % 32 % 4 * 2 + hc * 8 + e]
        for pw in T.serial(PW, annotations={"kda2.access": "g_elementwise"}):
            for m in T.serial(C * K // 8 // PT):
                for q in T.serial(2):
                    for e in T.vectorized(4):
                        ffrag[e] = gamma[(pw * 32 + tx % 32 + m * PT) // KC, (pw * 32 + tx % 32 + m * PT) % KC * 8 + q * 4 + e]
        # ---- A, then T = (I + A)^-1 ---------------------------------------------------------------------
        # A's accumulator fragments, two adjacent columns per lane (8-byte accesses; on the diagonal tiles the same
        # words, element by element): the pair of warps of rows 16I.. split K and meet here, every warp over all 2I
        # off-diagonal and both diagonal column tiles of its rows. At A's own positions warp (I, 0) stores its Aqk
        # partials and warp (I, 1) reads them; reflected through the tile's centre ((i, j) -> (63 − i, 63 − j), the
        # pair of columns swapped) warp (I, 1) stores its A partials and warp (I, 0) reads them and stores A (2 passes)
        for pw in T.serial(PW, annotations={"kda2.access": "t_store_a"}):
            for nt in T.serial(6):
                for h in T.serial(2):
                    if nt < pw % 4 * 2:
                        for c in T.vectorized(2):
                            tmat[pw % 4 * 16 + tx % 32 // 4 + h * 8, nt * 8 + tx % 32 % 4 * 2 + c] = ffrag[0]
            for dc in T.serial(2):
                for h in T.serial(2):
                    for c in T.vectorized(2):
                        tmat[pw % 4 * 16 + tx % 32 // 4 + h * 8, pw % 4 * 16 + dc * 8 + tx % 32 % 4 * 2 + c] = ffrag[0]
        for pw in T.serial(PW, annotations={"kda2.access": "t_refl_a"}):
            for pss in T.serial(2):
                if pss < 2 - pw // 4:
                    for nt in T.serial(6):
                        for h in T.serial(2):
                            if nt < pw % 4 * 2:
                                for c in T.vectorized(2):
                                    tmat[63 - pw % 4 * 16 - tx % 32 // 4 - h * 8, 62 - nt * 8 - tx % 32 % 4 * 2 + c] = \
                                        ffrag[0]
                    for dc in T.serial(2):
                        for h in T.serial(2):
                            for c in T.vectorized(2):
                                tmat[63 - pw % 4 * 16 - tx % 32 // 4 - h * 8,
                                     62 - pw % 4 * 16 - dc * 8 - tx % 32 % 4 * 2 + c] = ffrag[0]
        # the diagonal blocks' forward substitution, in place over A_II by pair 1's warps (1 and 5: pw 0, 1 here, the
        # same lane pattern): lanes 0..15 one block's columns, 16..31 the next block's
        for pw in T.serial(2, annotations={"kda2.access": "t_forward"}):
            for i in T.serial(16):
                tmat[(pw * 32 + tx % 32) // 16 * 16 + i, (pw * 32 + tx % 32) // 16 * 16 + tx % 16] = ffrag[0]
        # warps 4–7 copy the four inverted blocks from over A into T during level 1: 16-byte pieces, thread p =
        # 32 (pw − 4) + lane, pieces m = 0, 1: row diag_copy_row(p, m), columns 4 (p % 4) of its block
        for pw in T.serial(PW, annotations={"kda2.access": "t_diag_copy"}):
            if pw >= 4:
                for m in T.serial(2):
                    for e in T.vectorized(4):
                        ffrag[e] = tmat[diag_copy_row(pw, tx, m), diag_copy_row(pw, tx, m) // 16 * 16 + tx % 4 * 4 + e]
                        tmat[diag_copy_row(pw, tx, m), diag_copy_row(pw, tx, m) // 16 * 16 + tx % 4 * 4 + e] = ffrag[e]
        # The block levels on tensor cores (tf32 m16n8k8; warps pw < 4 at each level). Level 1: warp pw makes the 8
        # columns n0 = 16 J + 8 (pw % 2) of T_IJ, (I, J) = (2 (pw / 2) + 1, I − 1); level 2: warp pw the 8 columns
        # n0 = 8 pw of T21 (rows 32..63). A fragments (rows r + lane/4 (+8), columns k + lane%4 (+4)) of A_IJ, T_II
        # (level 1) and A21, T2 (level 2), A_IJ and A21 where A lies, reflected (63 − row, 63 − column); B fragments
        # (rows k + lane%4 (+4), column n0 + lane/4) of T_JJ and T1 (T1's columns from 16: rows 16..31 only); float2
        # stores of −Z in accumulator order.
        for pw in T.serial(PW, annotations={"kda2.access": "t_level_afrag"}):
            if pw < 4:
                for s2 in T.serial(2):
                    for h in T.serial(2):
                        for e4 in T.serial(2):
                            ffrag[0] = tmat[63 - (pw // 2 * 2 + 1) * 16 - tx % 32 // 4 - h * 8,
                                            63 - pw // 2 * 32 - s2 * 8 - tx % 32 % 4 - e4 * 4]
                            ffrag[0] = tmat[(pw // 2 * 2 + 1) * 16 + tx % 32 // 4 + h * 8,
                                            (pw // 2 * 2 + 1) * 16 + s2 * 8 + tx % 32 % 4 + e4 * 4]
                for m in T.serial(2):
                    for s4 in T.serial(4):
                        for h in T.serial(2):
                            for e4 in T.serial(2):
                                ffrag[0] = tmat[31 - m * 16 - tx % 32 // 4 - h * 8, 63 - s4 * 8 - tx % 32 % 4 - e4 * 4]
                                if s4 < 2 * (m + 1):
                                    ffrag[0] = tmat[32 + m * 16 + tx % 32 // 4 + h * 8, 32 + s4 * 8 + tx % 32 % 4 + e4 * 4]
        for pw in T.serial(PW, annotations={"kda2.access": "t_level_bfrag"}):
            if pw < 4:
                for s2 in T.serial(2):
                    for e4 in T.serial(2):
                        ffrag[0] = tmat[pw // 2 * 32 + s2 * 8 + tx % 32 % 4 + e4 * 4, pw // 2 * 32 + pw % 2 * 8 + tx % 32 // 4]
                for s4 in T.serial(4):
                    for e4 in T.serial(2):
                        if pw < 2 or s4 >= 2:
                            ffrag[0] = tmat[s4 * 8 + tx % 32 % 4 + e4 * 4, pw * 8 + tx % 32 // 4]
        for pw in T.serial(PW, annotations={"kda2.access": "t_level_store"}):
            if pw < 4:
                for h in T.serial(2):
                    for e in T.vectorized(2):
                        tmat[(pw // 2 * 2 + 1) * 16 + tx % 32 // 4 + h * 8, pw // 2 * 32 + pw % 2 * 8 + tx % 32 % 4 * 2 + e] = \
                            ffrag[e]
        # T's 16-bit copy, while level 2 runs: level 2's warps store their T21 columns as 16-bit pairs in accumulator
        # order; warps pw ≥ 4 copy T1 and T2 (thread p = 32 (pw − 4) + lane: row r(p / 8) + 16 m, 4 columns from
        # 4 (p % 8), + 32 for m ≥ 2; r(q) = q / 2 % 4 + 4 (q % 2) + 8 (q / 8)). Then each warp's ldmatrix of the
        # 16×16 blocks (rb, ks ≤ rb) of its row blocks, for w = T (β k 2^Γ) and again for u = T (β v)
        for pw in T.serial(PW, annotations={"kda2.access": "t21_store"}):
            if pw < 4:
                for m in T.serial(2):
                    for h in T.serial(2):
                        for e in T.vectorized(2):
                            t16[32 + m * 16 + tx % 32 // 4 + h * 8, pw * 8 + tx % 32 % 4 * 2 + e] = frag[e]
        for pw in T.serial(PW, annotations={"kda2.access": "t_convert"}):
            if pw >= 4:
                for m in T.serial(4):
                    for e in T.vectorized(4):
                        ffrag[e] = tmat[t16_copy_row(pw, tx, m), tx % 8 * 4 + m // 2 * 32 + e]
        for pw in T.serial(PW, annotations={"kda2.access": "t16_store"}):
            if pw >= 4:
                for m in T.serial(4):
                    for e in T.vectorized(4):
                        t16[t16_copy_row(pw, tx, m), tx % 8 * 4 + m // 2 * 32 + e] = frag[e]
        for pw in T.serial(PW, annotations={"kda2.access": "t16_ldmatrix", "kda2.phase_lanes": 8}):
            for which in T.serial(2):
                for j in T.serial(NRB6):
                    for ks in T.serial(4):
                        if ks <= rb6(pw, j):
                            for e in T.vectorized(8):
                                frag[e] = t16[rb6(pw, j) * 16 + tx % 8 + tx % 32 // 8 % 2 * 8, ks * 16 + tx % 32 // 16 * 8 + e]
        # ---- the block levels' per-warp scratch Y [32][8]: float2 stores of accumulator fragments (rows 16 m +
        # lane/4 (+8), columns 2 (lane%4)), then B fragments (rows 8 s + lane%4 (+4), column lane/4) -----------------
        for pw in T.serial(PW, annotations={"kda2.access": "y_store"}):
            if pw < 4:
                for m in T.serial(2):
                    for h in T.serial(2):
                        for e in T.vectorized(2):
                            y[m * 16 + tx % 32 // 4 + h * 8, tx % 32 % 4 * 2 + e] = ffrag[e]
        for pw in T.serial(PW, annotations={"kda2.access": "y_read"}):
            if pw < 4:
                for s4 in T.serial(4):
                    for e4 in T.serial(2):
                        ffrag[0] = y[s4 * 8 + tx % 32 % 4 + e4 * 4, tx % 32 // 4]
        # ---- state: o staging, exchange, bulk tiles -------------------------------------------------------
        for nt in T.serial(4, annotations={"kda2.access": "o_store"}):
            for c in T.serial(2):
                for h in T.serial(2):
                    o[nt * 8 + tx % 4 * 2 + c, tx % 32 // 4 + h * 8] = frag[0]
        for it in T.serial(2, annotations={"kda2.access": "o_read"}):
            for e in T.vectorized(8):
                frag[e] = o[(tx % 32 + it * 32) // 2, (tx % 32 + it * 32) % 2 * 8 + e]
        # wgmma state pass (kda2/chunk.cuh state_wg; no iterations for mma_sync variants): o staged in the consumed w
        # tile as [token][value column] by stmatrix.trans: store p of warp ww, lane 8m + r writes the 16-byte row
        # (token 8 (2p + m/2) + r, value columns 16 ww + 8 (m%2) ..+7), a phase per 8 lanes; then 16-byte row pieces,
        # thread p of the CTA at row p / (BV/8)
        for ww in T.serial(WGW, annotations={"kda2.access": "w_ostage_store", "kda2.phase_lanes": 8}):
            for p in T.serial(4):
                for e in T.vectorized(8):
                    w[(2 * p + tx % 32 // 16) * 8 + tx % 8, ww * 16 + tx % 32 // 8 % 2 * 8 + e] = frag[e]
        for ww in T.serial(WGW, annotations={"kda2.access": "w_ostage_read"}):
            for m in T.serial(WGR):
                for e in T.vectorized(8):
                    frag[e] = w[(ww * 32 + tx % 32 + m * 32 * WGW) // (BV // 8),
                                (ww * 32 + tx % 32 + m * 32 * WGW) % (BV // 8) * 8 + e]
        for nt in T.serial(12, annotations={"kda2.access": "xch"}):
            for e in T.vectorized(4):
                xch[nt * 32 + tx % 32, e] = ffrag[e]
        # ldmatrix of [n][k] tiles: lanes 0-7 rows 0-7 at k+0, 8-15 rows 0-7 at k+8, 16-31 rows 8-15
        for ks in T.serial(KH // 16, annotations={"kda2.access": "w_ldmatrix", "kda2.phase_lanes": 8}):
            for np_ in T.serial(4):
                for e in T.vectorized(8):
                    frag[e] = w[np_ * 16 + tx % 8 + tx % 32 // 16 * 8, tx // 32 % 2 * KH + ks * 16 + tx % 32 // 8 % 2 * 8 + e]
        for ks in T.serial(KH // 16, annotations={"kda2.access": "qg_ldmatrix", "kda2.phase_lanes": 8}):
            for np_ in T.serial(4):
                for e in T.vectorized(8):
                    frag[e] = qg[np_ * 16 + tx % 8 + tx % 32 // 16 * 8, tx // 32 % 2 * KH + ks * 16 + tx % 32 // 8 % 2 * 8 + e]
        # ldmatrix.trans of the [k = token][n = channel] kg tile: lanes 8-15 rows +8, 16-31 columns +8
        for ks in T.serial(4, annotations={"kda2.access": "kg_ldmatrix_trans", "kda2.phase_lanes": 8}):
            for np_ in T.serial(KH // 16):
                for e in T.vectorized(8):
                    frag[e] = kg[ks * 16 + tx % 8 + tx % 32 // 8 % 2 * 8, tx // 32 % 2 * KH + np_ * 16 + tx % 32 // 16 * 8 + e]
        for np_ in T.serial(4, annotations={"kda2.access": "aqk_ldmatrix", "kda2.phase_lanes": 8}):
            for ks in T.serial(4):
                if ks <= np_:
                    for e in T.vectorized(8):
                        frag[e] = aqk[np_ * 16 + tx % 8 + tx % 32 // 16 * 8, ks * 16 + tx % 32 // 8 % 2 * 8 + e]
        # ---- combine: fill, broadcast float4 reads of one row, row stores -------------------------------
        for pw in T.serial(CW, annotations={"kda2.access": "x_fill"}):
            for m in T.serial(K * XC // (32 * CW)):
                x[(pw * 32 + tx % 32 + m * 32 * CW) // XC, (pw * 32 + tx % 32 + m * 32 * CW) % XC] = ffrag[0]
        for j in T.serial(4, annotations={"kda2.access": "x_read"}):
            for q in T.serial(XC // 2 // 4):
                for e in T.vectorized(4):
                    ffrag[e] = x[j, tx % 2 * (XC // 2) + q * 4 + e]
        for pw in T.serial(CW, annotations={"kda2.access": "x_store"}):
            for q in T.serial(XC // 2 // 4):
                for e in T.vectorized(4):
                    x[(pw * 32 + tx % 32) // 2, tx % 2 * (XC // 2) + q * 4 + e] = ffrag[e]

    return kda2_chunk_stage
