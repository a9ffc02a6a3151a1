// The fused 16-token chunk forward (kda2/fused.cuh Fused16) as a bare kernel: one CTA of Fused16::THREADS per
// (sequence, value head), two an SM, Fused16::SMEM_BYTES of dynamic shared memory, the call's KDA2RecurrentArgs by
// value.
// tests/test_wgmma.py compiles it (HGMMA, no local memory); tests/gpu/test_fused_gpu.py holds it to the fp64
// reference on the chunk GPU tests' cases; experiments/2026-12-05-fused times it.
#include "kda2/fused.cuh"

#define KDA2_FUSED_CHECK(NAME, E)                                                                                   \
  extern "C" __global__ void __launch_bounds__(kda2::fused::Fused16<E>::THREADS, kda2::fused::Fused16<E>::CTAS_PER_SM) \
      NAME(const KDA2RecurrentArgs a) {                                                                             \
    kda2::fused::Fused16<E>::run(a);                                                                                \
  }
KDA2_FUSED_CHECK(kda2_fused16_bf16, __nv_bfloat16)
KDA2_FUSED_CHECK(kda2_fused16_f16, __half)
// Its dynamic shared memory in bytes and its block size (the launcher asks here rather than keeping copies).
extern "C" __global__ void kda2_fused16_shape(int* out) {
  out[0] = kda2::fused::Fused16<__nv_bfloat16>::SMEM_BYTES;
  out[1] = kda2::fused::Fused16<__nv_bfloat16>::THREADS;
}
