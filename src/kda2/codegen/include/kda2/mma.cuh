// KDA² PTX wrappers of the tensor-core kernels: mma.sync, ldmatrix, sm_90 bulk copies on an
// mbarrier (kda2/cp_async.cuh), the SFU's ex2 / lg2, bf16 / fp16 packing. Configuration-free; every one
// is inlined at its call site.
#pragma once
#include <stdint.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kda2/cp_async.cuh"

namespace kda2 {

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float2 unpack_bf16(uint32_t u) {
  __nv_bfloat162 h;
  *reinterpret_cast<uint32_t*>(&h) = u;
  return __bfloat1622float2(h);
}
// D += A·B, m16n8k16, bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// D += A·B, m16n8k16, fp16 in, fp32 accumulate.
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// The 16-bit tensor-core operand type T (bf16 or fp16): packing two fp32 into a 32-bit operand word (round to
// nearest; an fp16 overflow gives ±Inf, never a wrapped value), unpacking one, narrowing one element, and the
// m16n8k16 mma with fp32 accumulation. The bf16 members are the plain helpers above, so code written on
// Tc16<__nv_bfloat16> compiles to what it did on them.
template <class T>
struct Tc16;
template <>
struct Tc16<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) { return pack_bf16(lo, hi); }
  static __device__ __forceinline__ float2 unpack(uint32_t u) { return unpack_bf16(u); }
  static __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    kda2::mma(d, a, b0, b1);
  }
};
template <>
struct Tc16<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  static __device__ __forceinline__ float2 unpack(uint32_t u) {
    __half2 h;
    *reinterpret_cast<uint32_t*>(&h) = u;
    return __half22float2(h);
  }
  static __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_f16(d, a, b0, b1);
  }
};
// D += A·B, m16n8k8, tf32 in (10-bit mantissa), fp32 accumulate.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// An fp32 value as an m16n8k8 tf32 operand, rounded as cvt.rna.tf32.f32 rounds a finite x: half away from zero at
// the 13th bit (a carry into the exponent is the correct rounding; ±inf stays ±inf). The tensor cores read a tf32
// operand's upper 19 bits, so the add is the whole rounding: the cvt's mask of the low bits (and its |x| < inf test)
// would be one and two more instructions per operand. Measured on sm_90a (H200): the same outputs, bit for bit, as
// with the mask (experiments/2026-12-02-tf32, call 1); on sm_80 not measured.
__device__ __forceinline__ uint32_t tf32_operand(float x) { return __float_as_uint(x) + 0x1000u; }
// 1 / x for a normal x: the SFU's rcp, what __fdividef multiplies by; without __fdividef's rescaling of
// denormal divisors (two tests and two multiplies).
__device__ __forceinline__ float rcp_normal(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// sm_90: four 8×8 blocks of 16-bit elements stored as the lanes hold them (stmatrix). Lane 8m + r gives the address
// of row r of block m (lane 4i + c: row i, columns 2c, 2c + 1 in register m).
__device__ __forceinline__ void stsm_x4(const uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n"
               ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
#endif
}

// sm_90: four 8×8 blocks of 16-bit elements stored transposed (stmatrix .trans). Lane 8m + r gives the address of
// stored row r of block m, which receives column r of the block as the lanes hold it (lane 4i + c: row i, columns
// 2c, 2c + 1 in register m).
__device__ __forceinline__ void stsm_x4_t(const uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n"
               ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
#endif
}

}  // namespace kda2
