// KDA² sm_90a building blocks of the prep's w / u by blocked forward substitution (docs/DESIGN.md §1, "What each of
// those changes costs in accuracy"; experiments/2026-12-05-prep-numerics): per 16-token sub-chunk I of a chunk,
//   R_I = X_I − Σ_{J<I} K'_IJ Y_J     register-A wgmma m64n16k16, 16-bit (the channels are M, a sub-chunk's tokens N)
//   Y_I = (T_II diag β_I) R_I          mma.sync m16n8k8 tf32, A straight from the wgmma accumulators
// — the rounding order kda2/reference/rounding.py bfs_chunk models. The prep's PREP_BFS variants use bfs_solve
// (kda2/chunk.cuh prep_wu_bfs); tests/kernels/bfs_check.cu runs it alone over one chunk.
#pragma once
#include <stdint.h>

#include "kda2/cp_async.cuh"
#include "kda2/mma.cuh"
#include "kda2/wgmma.cuh"

namespace kda2 {

// D (+)= ±A · B, m64n16k16: A (T: bf16 or fp16) from registers, B K-major by descriptor, fp32 accumulate, 8
// accumulators a thread (the layouts of kda2/wgmma.cuh WgmmaRS). NEG: the product subtracted (the instruction's
// imm-scale-b −1), which is how R_I = X_I − Σ K'_IJ Y_J takes K' as it is, with no negation pass.
template <class T, bool NEG>
struct WgmmaRS16;
#define KDA2_WGMMA_RS16(CT, TY)                                                                                       \
  template <bool NEG>                                                                                                 \
  struct WgmmaRS16<CT, NEG> {                                                                                         \
    static __device__ __forceinline__ void run(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b, bool scale_d) { \
      asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %13, 0;\n"                                                     \
                   "wgmma.mma_async.sync.aligned.m64n16k16.f32." TY "." TY " {%0,%1,%2,%3,%4,%5,%6,%7}, "              \
                   "{%8,%9,%10,%11}, %12, p, 1, %14, 0;\n}\n"                                                          \
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])   \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(scale_d)),         \
                     "n"(NEG ? -1 : 1));                                                                              \
    }                                                                                                                 \
  };
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
KDA2_WGMMA_RS16(__nv_bfloat16, "bf16")
KDA2_WGMMA_RS16(__half, "f16")
#else   // compiles to nothing below sm_90 (callers are sm_90a-only)
template <class CT, bool NEG>
struct WgmmaRS16NoOp {
  static __device__ __forceinline__ void run(float (&)[8], const uint32_t (&)[4], uint64_t, bool) {}
};
template <bool NEG> struct WgmmaRS16<__nv_bfloat16, NEG> : WgmmaRS16NoOp<__nv_bfloat16, NEG> {};
template <bool NEG> struct WgmmaRS16<__half, NEG> : WgmmaRS16NoOp<__half, NEG> {};
#endif
#undef KDA2_WGMMA_RS16

// The m16n8k8 tf32 A fragment of k-step s (columns 8s .. 8s + 7) of an fp32 accumulator pair c[8] (an m16n16 tile in
// mma / wgmma accumulator order: c[4j + e] at row g + 8 (e / 2), column 8j + 2t + e % 2), with no data movement: the
// fragment wants columns t and t + 4 where the accumulator holds 2t and 2t + 1, so the product runs its k in the order
// logical t ↦ column 8s + 2t, t + 4 ↦ 8s + 2t + 1 — and the B fragment must follow it: b0 from row (token) 8s + 2t,
// b1 from 8s + 2t + 1.
__device__ __forceinline__ void tf32_afrag_from_acc(const float (&c)[8], int s, uint32_t (&a)[4]) {
  a[0] = tf32_operand(c[4 * s]);
  a[1] = tf32_operand(c[4 * s + 2]);
  a[2] = tf32_operand(c[4 * s + 1]);
  a[3] = tf32_operand(c[4 * s + 3]);
}

// The substitution's shared operands: three 16-row × 64-k panels of the input dtype, 128-byte swizzled (kda2/wgmma.cuh
// panel128_offset), 2 KB each from a 1024-byte aligned base. Panel I − 1 (sub-chunk I = 1..3) holds K'_IJ at k = 16J + j
// (row i, the token 16I + i; J < I); panel 0's k BFS_IDENTITY_K .. + 15 hold the 16 × 16 identity, the B operand that
// seeds a stage's accumulators with X_Iᵀ (an exact product, instead of unpacking every element).
constexpr int BFS_PANEL_ELEMS = 16 * 64, BFS_PANELS_BYTES = 3 * 2 * BFS_PANEL_ELEMS, BFS_IDENTITY_K = 48;

// Piece q (0..31) of the identity: row q / 2, k BFS_IDENTITY_K + 8 (q % 2) .. + 7, one 16-byte store.
template <class E>
__device__ __forceinline__ void bfs_identity_piece(E* panels, int q) {
  const int i = q >> 1, k0 = 8 * (q & 1);
  uint32_t w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    w[e] = Tc16<E>::pack(i == k0 + 2 * e ? 1.f : 0.f, i == k0 + 2 * e + 1 ? 1.f : 0.f);
  *reinterpret_cast<uint4*>(panels + panel128_offset(i, BFS_IDENTITY_K + k0, 16)) = make_uint4(w[0], w[1], w[2], w[3]);
}

// One warpgroup's blocked substitution over a 64-token chunk (the rounding order of kda2/reference/rounding.py
// bfs_chunk): Y = (I + diag β K')⁻¹ diag β X for MT · 64 channels, transposed (channels as M; warp w4 of the warpgroup
// owns channels 64 mt + 16 w4 .. + 15 of each tile). X: [token][channel] 16-bit, row stride ldx (elements), read by
// ldmatrix.trans; panels: the shared address of the panels above (1024-byte aligned); td: the tf32 operands of
// T_II diag β (bits, rounded as kda2/mma.cuh tf32_operand; element (i, j) of block I at td[(16I + i) · ldt + dstep · I + j]:
// dstep 16 where they lie on a 64 × 64 tile's diagonal, 0 for a [64][16] stack). store(I, mt, r4) receives Y_I's
// 16-bit fragments of tile mt as stmatrix wants them (matrices: channels + 8 (m % 2), tokens + 8 (m / 2)). The panels
// and td must be visible to the async proxy (fence_proxy_async, then a barrier) before the call.
template <class E, int MT, class Store>
__device__ __forceinline__ void bfs_solve(const E* X, int ldx, uint32_t panels, const uint32_t* td, int ldt, int dstep,
                                          Store&& store) {
  using TC = Tc16<E>;
  const int lane = threadIdx.x & 31, w4 = (threadIdx.x >> 5) & 3, g = lane >> 2, t = lane & 3;
  const int lr = lane & 7, lm = lane >> 3;
  uint32_t ya[4][MT][4];   // Y_J as 16-bit A fragments, k = the tokens of J (Y_3's are never read)
#pragma unroll
  for (int I = 0; I < 4; ++I) {
    // X_Iᵀ as A fragments: ldmatrix.trans of the [token][channel] block gives lane (g, t) the tokens 2t, 2t + 1 of
    // channel g; matrices tokens +0 / +8 × channels +0 / +8 land as A's (k +0, row +0), (k +8, row +0), (k +0, row +8), ...
    uint32_t xa[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      uint32_t b[4];
      ldsm_x4_t(b, smem_u32(X + (16 * I + lr + 8 * (lm & 1)) * ldx + 64 * mt + 16 * w4 + 8 * (lm >> 1)));
      xa[mt][0] = b[0];
      xa[mt][1] = b[2];
      xa[mt][2] = b[1];
      xa[mt][3] = b[3];
    }
    // R_I = X_Iᵀ · I − Σ_{J<I} Y_Jᵀ K'_IJᵀ, one group
    float r[MT][8];
    wgmma_fence();   // xa and ya were written by ordinary instructions
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      WgmmaRS16<E, false>::run(r[mt], xa[mt], smem_desc_k128(panels, BFS_IDENTITY_K, 16), false);
#pragma unroll
    for (int J = 0; J < 3; ++J)
      if (J < I)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          WgmmaRS16<E, true>::run(r[mt], ya[J][mt], smem_desc_k128(panels + (I - 1) * 2048, 16 * J, 16), true);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) wgmma_hold(r[mt]);
    // Y_I = R_I (T_II diag β)ᵀ in tf32: B[k][n] = (T_II diag β)[n][k] at logical k t ↦ token 8s + 2t, t + 4 ↦ 8s + 2t + 1;
    // one tile at a time (its R dies as its Y is made: the prep runs at its register cap)
    uint2 b[2][2];
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
        b[s][nt] = *reinterpret_cast<const uint2*>(td + (16 * I + 8 * nt + g) * ldt + dstep * I + 8 * s + 2 * t);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float y[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) y[nt][e] = 0.f;
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        uint32_t a[4];
        tf32_afrag_from_acc(r[mt], s, a);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma_tf32(y[nt], a, b[s][nt].x, b[s][nt].y);
      }
      // Y_I in the input dtype: the later stages' A fragments, and the caller's staging
      const uint32_t r4[4] = {TC::pack(y[0][0], y[0][1]), TC::pack(y[0][2], y[0][3]), TC::pack(y[1][0], y[1][1]),
                              TC::pack(y[1][2], y[1][3])};
#pragma unroll
      for (int e = 0; e < 4; ++e) ya[I][mt][e] = r4[e];
      store(I, mt, r4);
    }
  }
}

}  // namespace kda2
