// KDA² sm_90a building blocks of the prep's w / u by blocked forward substitution (docs/DESIGN.md §1, "What each of
// those changes costs in accuracy"; experiments/2026-12-05-prep-numerics): per 16-token sub-chunk I of a chunk,
//   R_I = X_I − Σ_{J<I} K'_IJ Y_J     register-A wgmma m64n16k16, 16-bit (the channels are M, a sub-chunk's tokens N)
//   Y_I = (T_II diag β_I) R_I          mma.sync m16n8k8 tf32, A straight from the wgmma accumulators
// — the rounding order kda2/reference/rounding.py bfs_chunk models. tests/kernels/bfs_check.cu runs them over one
// chunk; the prep does not use them yet (a header of its own, so that no built kernel depends on it until one does).
#pragma once
#include <stdint.h>

#include "kda2/mma.cuh"
#include "kda2/wgmma.cuh"

namespace kda2 {

// D (+)= A · B, m64n16k16 (kda2/wgmma.cuh WgmmaRS: A from registers, B by descriptor, fp32 accumulate; 8
// accumulators a thread).
#define KDA2_WGMMA_RS_N16(TY)                                                                                         \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %13, 0;\n"                                                         \
               "wgmma.mma_async.sync.aligned.m64n16k16.f32." TY "." TY " {"                                           \
               "%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, %14;\n}\n"                                   \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])       \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(scale_d)),             \
                 "n"(TRANS_B ? 1 : 0))
template <bool TRANS_B>
struct WgmmaRS<__nv_bfloat16, 16, TRANS_B> {
  static __device__ __forceinline__ void run(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b, bool scale_d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    KDA2_WGMMA_RS_N16("bf16");
#endif
  }
};
template <bool TRANS_B>
struct WgmmaRS<__half, 16, TRANS_B> {
  static __device__ __forceinline__ void run(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b, bool scale_d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    KDA2_WGMMA_RS_N16("f16");
#endif
  }
};
#undef KDA2_WGMMA_RS_N16

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

}  // namespace kda2
