// The gate and β activations both kernel families compute (docs/DESIGN.md §1), in log2 units: every exponential
// they take has a non-positive argument (so the unbounded softplus gate needs no clamp), on the SFU's ex2 / lg2.
#pragma once
#include "kda2/abi.h"

namespace kda2 {

constexpr float LOG2E = 1.4426950408889634f;

// 2^x for x ≤ 0 (the kernels' only use): the SFU's ex2, flushing results below 2^-126 to zero.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
// log2(x) for x in [1, 2] (the kernels' only use): the SFU's lg2.
__device__ __forceinline__ float lg2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float sigmoid_stable(float z) {
  // Only exponentials of non-positive arguments.
  const float e = __expf(-fabsf(z));
  return z >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
}
// log2(e)·softplus(y) = log2(e)·max(y, 0) + log2(1 + 2^(−|y|·log2 e)): one ex2 of a non-positive argument.
__device__ __forceinline__ float softplus_log2(float y) {
  return fmaf(fmaxf(y, 0.f), LOG2E, lg2(1.f + ex2(-fabsf(y) * LOG2E)));
}
// log2(e)·softplus(y) for z = y·log2 e: max(z, 0) + log2(1 + 2^−|z|), the same function as softplus_log2 with the
// scale taken by the caller (the chunk prep folds it into the bias: one fma per element instead of an add and a mul).
__device__ __forceinline__ float softplus2(float z) { return fmaxf(z, 0.f) + lg2(1.f + ex2(-fabsf(z))); }
// sigmoid(z) with one ex2 of a non-positive argument and an approximate reciprocal.
__device__ __forceinline__ float sigmoid_fast(float z) {
  const float e = ex2(-fabsf(z) * LOG2E), r = __fdividef(1.f, 1.f + e);
  return z >= 0.f ? r : e * r;
}

// The chunk kernels' gate: one key channel's raw gates x[0..N) in log2 units, up to the factor every row of the
// channel shares, which is returned — the softplus gate's −exp(A_log), multiplied into the scanned sums once instead of
// into every element. a_scale: exp(A_log) (1 without); bias: the channel's dt_bias (0 without). SOFTPLUS / LOWER_BOUND:
// the activations compiled in (the precomputed gate needs none).
template <bool SOFTPLUS, bool LOWER_BOUND, int N>
__device__ __forceinline__ float gate_rows_log2(float (&x)[N], int mode, float a_scale, float bias, float lower_bound) {
  if (SOFTPLUS && mode == KDA2_GATE_SOFTPLUS) {
    const float bias2 = bias * LOG2E;
#pragma unroll
    for (int e = 0; e < N; ++e) x[e] = softplus2(fmaf(x[e], LOG2E, bias2));
    return -a_scale;
  }
  if (LOWER_BOUND && mode == KDA2_GATE_LOWER_BOUND) {
    const float lb2 = lower_bound * LOG2E;
#pragma unroll
    for (int e = 0; e < N; ++e) x[e] = lb2 * sigmoid_fast(a_scale * (x[e] + bias));
    return 1.f;
  }
#pragma unroll
  for (int e = 0; e < N; ++e) x[e] *= LOG2E;
  return 1.f;
}

}  // namespace kda2
