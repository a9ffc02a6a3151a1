// One warpgroup through kda2/wgmma.cuh: D[64][N] = (accumulate ? D : 0) + A[64][K] · B, A from registers (fragments
// loaded from global), B copied into shared memory in the panel layout: K-major (B given as [N][K], D = A·Bᵀ) or,
// TRANS, N-major (B given as [K][N], D = A·B, its k as the panel row). tests/test_wgmma.py compiles it (HGMMA in
// the SASS, no local memory) and tests/gpu/test_wgmma_gpu.py compares it with an fp64 product.
#include "kda2/wgmma.cuh"

namespace {

template <class T, int N, int K, bool TRANS>
__device__ void check(const T* __restrict__ A, const T* __restrict__ B, float* __restrict__ D, int accumulate) {
  static_assert(K % 64 == 0 && N % 64 == 0, "whole 64-wide panels");
  __shared__ __align__(1024) T sB[N * K];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  for (int i = tid; i < N * K; i += 128)
    sB[TRANS ? kda2::panel128_offset(i / N, i % N, K) : kda2::panel128_offset(i / K, i % K, N)] = B[i];
  kda2::fence_proxy_async();   // ordinary stores, read by the async proxy
  __syncthreads();

  float d[N / 2];
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * warp + g + 8 * (e >> 1), col = 8 * j + 2 * t + (e & 1);
      d[4 * j + e] = accumulate ? D[row * N + col] : 0.f;
    }
  uint32_t a[K / 16][4];
  const int r0 = 16 * warp + g;
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
    const int c0 = 16 * ks + 2 * t;
    a[ks][0] = *reinterpret_cast<const uint32_t*>(A + r0 * K + c0);
    a[ks][1] = *reinterpret_cast<const uint32_t*>(A + (r0 + 8) * K + c0);
    a[ks][2] = *reinterpret_cast<const uint32_t*>(A + r0 * K + c0 + 8);
    a[ks][3] = *reinterpret_cast<const uint32_t*>(A + (r0 + 8) * K + c0 + 8);
  }
  const uint32_t tile = static_cast<uint32_t>(__cvta_generic_to_shared(sB));
  kda2::wgmma_fence();   // the accumulators and A fragments above are written before the mmas read them
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks)
    kda2::WgmmaRS<T, N, TRANS>::run(d, a[ks], TRANS ? kda2::smem_desc_mn128(tile, 16 * ks, K)
                                                    : kda2::smem_desc_k128(tile, 16 * ks, N),
                                    accumulate != 0 || ks > 0);
  kda2::wgmma_commit();
  kda2::wgmma_wait<0>();
  kda2::wgmma_hold(d);
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * warp + g + 8 * (e >> 1), col = 8 * j + 2 * t + (e & 1);
      D[row * N + col] = d[4 * j + e];
    }
}

}  // namespace

// K-major B over K = 128 (the state products over key channels); N-major B over K = 64 (over a chunk's tokens)
#define KDA2_WGMMA_CHECK(NAME, T, N, K, TRANS)                                                            \
  extern "C" __global__ void __launch_bounds__(128) NAME(const T* A, const T* B, float* D, int accumulate) { \
    check<T, N, K, TRANS>(A, B, D, accumulate);                                                            \
  }
KDA2_WGMMA_CHECK(kda2_wgmma_check_bf16_n64, __nv_bfloat16, 64, 128, false)
KDA2_WGMMA_CHECK(kda2_wgmma_check_bf16_n128, __nv_bfloat16, 128, 128, false)
KDA2_WGMMA_CHECK(kda2_wgmma_check_f16_n64, __half, 64, 128, false)
KDA2_WGMMA_CHECK(kda2_wgmma_check_f16_n128, __half, 128, 128, false)
KDA2_WGMMA_CHECK(kda2_wgmma_check_bf16_n64_t, __nv_bfloat16, 64, 64, true)
KDA2_WGMMA_CHECK(kda2_wgmma_check_bf16_n128_t, __nv_bfloat16, 128, 64, true)
KDA2_WGMMA_CHECK(kda2_wgmma_check_f16_n128_t, __half, 128, 64, true)
