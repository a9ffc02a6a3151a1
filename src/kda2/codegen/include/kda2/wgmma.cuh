// KDA² sm_90a warpgroup MMA (wgmma) wrappers: the building blocks of the fused chunk kernel (docs/DESIGN.md §1,
// "fused prefill"), whose consumer warpgroups keep the state in wgmma accumulators. Configuration-free; every one
// is inlined at its call site and compiles to nothing below sm_90 (callers are sm_90a-only).
//
// The one product shape the state recurrence needs: D[64 × N] (+)= A[64 × 16] · B[16 × N], A from registers (the
// state or v_new, converted from accumulators — the accumulator layout of m64nN is the A-fragment layout, as for
// mma.sync m16n8k16), B from shared memory, K-major (each of its N rows holds 16 consecutive k), fp32 accumulate.
// Per warp w of the warpgroup and lane (g = lane / 4, t = lane % 4):
//   A fragment (4 × 32 bit): {A[16w+g][2t..2t+1], A[16w+g+8][2t..], A[16w+g][2t+8..], A[16w+g+8][2t+8..]}
//   accumulator d[4j + e]:   row 16w + g (e < 2) or 16w + g + 8 (e ≥ 2), column 8j + 2t + (e & 1)
//
// B tiles live in shared memory as 128-byte-swizzled K-major panels (the layout the copy engine and wgmma share):
// panel p holds k columns 64p .. 64p + 63 of every row, row r at 128·r bytes, its 16-byte piece c (8 k) at piece
// c ^ (r % 8); panels are rows·128 bytes apart and 1024-byte aligned. panel128_offset() is that map (for whoever
// writes a tile), smem_desc_k128() the descriptor of the 16-k slice a wgmma reads.
#pragma once
#include <stdint.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kda2/cp_async.cuh"

namespace kda2 {

// Element offset of (row, k) in a panel tile of `rows` rows (16-bit elements, 64 k per panel).
__host__ __device__ constexpr int panel128_offset(int row, int k, int rows) {
  return (k >> 6) * rows * 64 + row * 64 + ((((k >> 3) & 7) ^ (row & 7)) << 3) + (k & 7);
}

// Descriptors in two words. lo: start address in 16-byte units (bits 0-13) | leading byte offset in 16-byte units
// (bits 16-29); hi: stride byte offset 1024 B between 8-row groups (bits 32-45), swizzle mode 1 = 128 B (bits 62-63).
// A caller stepping through the slices of tiles keeps a lo word and adds constants to it: one add per wgmma (built
// from the address each time, ~5 uniform instructions per wgmma were 13 % of the chunk state pass's instructions:
// H200, P5, ncu). Shared addresses are below 2^18, so the start field never carries into the offset field.
__device__ __forceinline__ uint64_t desc128(uint32_t lo) {
  uint64_t d;
  asm("mov.b64 %0, {%1, %2};" : "=l"(d) : "r"(lo), "r"((1024u >> 4) | (1u << 30)));
  return d;
}
// lo word of a K-major tile at 16-byte unit `at16` (leading byte offset unused by swizzled K-major layouts: 1), and
// of an N-major one of `rows` rows (leading byte offset: the distance between 64-wide n panels, rows·128 B).
__device__ __forceinline__ uint32_t desc_k128_lo(uint32_t at16) { return at16 | (1u << 16); }
__device__ __forceinline__ uint32_t desc_mn128_lo(uint32_t at16, int rows) {
  return at16 | (static_cast<uint32_t>(rows * 128 >> 4) << 16);
}
// Byte offset of the 16-k slice at k0 (a multiple of 16) in a K-major panel tile of `rows` rows: within a 128-byte
// row the slice starts 32·(k0 % 64 / 16) bytes in (the hardware applies the XOR to the address it forms); in an
// N-major one (imm-trans-b = 1: B[k][n] stored with k as the panel row) it starts at row k0.
__host__ __device__ constexpr int k128_slice_bytes(int k0, int rows) { return (k0 >> 6) * rows * 128 + ((k0 & 63) >> 4) * 32; }
__host__ __device__ constexpr int mn128_slice_bytes(int k0) { return k0 * 128; }

// Descriptor of the 16-k slice starting at k0 of a panel tile at shared address `tile` (1024-byte aligned) of `rows`
// rows, read K-major.
__device__ __forceinline__ uint64_t smem_desc_k128(uint32_t tile, int k0, int rows) {
  return desc128(desc_k128_lo(((tile + static_cast<uint32_t>(k128_slice_bytes(k0, rows))) & 0x3FFFF) >> 4));
}

// The same panels read N-major: a tile written [token][channel] serves as K-major B when the product runs over
// channels and as N-major B when it runs over tokens (PTX ISA, "Matrix Descriptor Format", MN-major swizzled).
__device__ __forceinline__ uint64_t smem_desc_mn128(uint32_t tile, int k0, int rows) {
  return desc128(desc_mn128_lo(((tile + static_cast<uint32_t>(mn128_slice_bytes(k0))) & 0x3FFFF) >> 4, rows));
}

// Ordering: registers an mma reads are final before it issues (fence); issued mmas form a group (commit); wait
// until at most N groups are in flight (wait, before reading the accumulators). Shared memory written by ordinary
// stores is visible to wgmma only after fence_proxy_async() and a barrier.
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// D (+)= A · B, m64nNk16, A from registers, B by descriptor; scale_d false: D = A · B. T: the 16-bit operand type
// (bf16 or fp16); N: 64 or 128 (N / 2 accumulators per thread); TRANS_B: B is N-major (smem_desc_mn128), else
// K-major (smem_desc_k128).
template <class T, int N, bool TRANS_B = false>
struct WgmmaRS;
// One asm statement per N (its operand list is the accumulator array); the 16-bit type is the macro's argument.
#define KDA2_WGMMA_RS_N64(TY)                                                                                         \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"                                                         \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {"                                           \
               "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                                               \
               "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"                                      \
               "}, {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"                                                        \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),      \
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),             \
                 "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),           \
                 "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),           \
                 "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(scale_d)),             \
                 "n"(TRANS_B ? 1 : 0))
#define KDA2_WGMMA_RS_N128(TY)                                                                                        \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"                                                         \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {"                                          \
               "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                                               \
               "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"                                     \
               "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"                                     \
               "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"                                      \
               "}, {%64,%65,%66,%67}, %68, p, 1, 1, %70;\n}\n"                                                        \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),      \
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),             \
                 "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),           \
                 "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),           \
                 "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),           \
                 "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),           \
                 "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),           \
                 "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),           \
                 "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])            \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(scale_d)),             \
                 "n"(TRANS_B ? 1 : 0))
template <bool TRANS_B>
struct WgmmaRS<__nv_bfloat16, 64, TRANS_B> {
  static __device__ __forceinline__ void run(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, bool scale_d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    KDA2_WGMMA_RS_N64("bf16");
#endif
  }
};
template <bool TRANS_B>
struct WgmmaRS<__half, 64, TRANS_B> {
  static __device__ __forceinline__ void run(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, bool scale_d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    KDA2_WGMMA_RS_N64("f16");
#endif
  }
};
template <bool TRANS_B>
struct WgmmaRS<__nv_bfloat16, 128, TRANS_B> {
  static __device__ __forceinline__ void run(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, bool scale_d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    KDA2_WGMMA_RS_N128("bf16");
#endif
  }
};
template <bool TRANS_B>
struct WgmmaRS<__half, 128, TRANS_B> {
  static __device__ __forceinline__ void run(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, bool scale_d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    KDA2_WGMMA_RS_N128("f16");
#endif
  }
};
#undef KDA2_WGMMA_RS_N64
#undef KDA2_WGMMA_RS_N128

// Keeps an accumulator array in registers across code the compiler could otherwise move it around (between
// issuing a wgmma on it and waiting for it, nothing may read or write it).
template <int R>
__device__ __forceinline__ void wgmma_hold(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

}  // namespace kda2
