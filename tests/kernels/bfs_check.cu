// One warpgroup solving a 64-token chunk's w (or u) the way issue 12's prep would (docs/DESIGN.md §1, "What each of
// those changes costs in accuracy"; experiments/2026-12-05-prep-numerics, variant bfs-mixed): by blocked forward
// substitution over the four 16-token sub-chunks, transposed so the C channels are the MMA's M,
//   R_I = X_I − Σ_{J<I} K'_IJ Y_J     register-A wgmma m64n16k16 (16-bit), A = Y_Jᵀ straight from the accumulators
//   Y_I = (T_II diag β_I) R_I          mma.sync m16n8k8 tf32, A = R_Iᵀ straight from the wgmma accumulators
// so Y = (I + diag β K')⁻¹ diag β X = T diag β X. Inputs: K' [64][64] fp32 (strictly lower; the A tile without β),
// T_II [64][16] fp32 (row 16I + i holds T_II's row i), β [64], X [64][C] 16-bit token-major; output Y [64][C] fp32.
// The −K'_IJ blocks are written as 16-bit 128-byte-swizzled K-major panels (one per row block I ≥ 1: 16 rows of
// 64 k, k = the column token j), the B operand of the wgmma. tests/test_wgmma.py compiles it (HGMMA, no local
// memory), tests/gpu/test_wgmma_gpu.py compares it with the rounding model and with an fp64 solve.
#include "kda2/bfs.cuh"
#include "kda2/elem16.cuh"

namespace {

template <class T, int C>
__device__ void bfs(const float* __restrict__ Kp, const float* __restrict__ Tdiag, const float* __restrict__ beta,
                    const T* __restrict__ X, float* __restrict__ Y) {
  using TC = kda2::Tc16<T>;
  constexpr int MT = C / 64;   // m64 tiles of channels
  __shared__ __align__(1024) T sP[3][16 * 64];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  for (int p = tid; p < 3 * 16 * 64; p += 128) {
    const int I = p / (16 * 64) + 1, i = p / 64 % 16, j = p % 64;
    sP[I - 1][kda2::panel128_offset(i, j, 16)] = TC::from_f(j < 16 * I ? -Kp[(16 * I + i) * 64 + j] : 0.f);
  }
  kda2::fence_proxy_async();   // ordinary stores, read by the async proxy
  __syncthreads();

  uint32_t ya[4][MT][4];       // Y_J as 16-bit A fragments (k = token of sub-chunk J)
#pragma unroll
  for (int I = 0; I < 4; ++I) {
    float r[MT][8];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const int ch = 64 * mt + 16 * warp + g + 8 * ((q & 3) >> 1), tok = 16 * I + 8 * (q >> 2) + 2 * t + (q & 1);
        r[mt][q] = kda2::Elem16<T>::to_f(X[tok * C + ch]);
      }
    if (I > 0) {
      const uint32_t panel = static_cast<uint32_t>(__cvta_generic_to_shared(sP[I - 1]));
      kda2::wgmma_fence();   // r and ya were written by ordinary instructions
#pragma unroll
      for (int J = 0; J < I; ++J)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          kda2::WgmmaRS<T, 16, false>::run(r[mt], ya[J][mt], kda2::smem_desc_k128(panel, 16 * J, 16), true);
      kda2::wgmma_commit();
      kda2::wgmma_wait<0>();
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) kda2::wgmma_hold(r[mt]);
    }
    float y[MT][2][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) y[mt][nt][e] = 0.f;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      // B[k][n] = T_II[n][k] β_k at logical k t ↦ token 8s + 2t, t + 4 ↦ 8s + 2t + 1 (kda2/bfs.cuh tf32_afrag_from_acc)
      uint32_t b[2][2];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int i = 16 * I + 8 * nt + g, j = 8 * s + 2 * t;
        const float2 tv = *reinterpret_cast<const float2*>(Tdiag + i * 16 + j);
        const float2 bv = *reinterpret_cast<const float2*>(beta + 16 * I + j);
        b[nt][0] = kda2::tf32_operand(tv.x * bv.x);
        b[nt][1] = kda2::tf32_operand(tv.y * bv.y);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        uint32_t a[4];
        kda2::tf32_afrag_from_acc(r[mt], s, a);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) kda2::mma_tf32(y[mt][nt], a, b[nt][0], b[nt][1]);
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      ya[I][mt][0] = TC::pack(y[mt][0][0], y[mt][0][1]);
      ya[I][mt][1] = TC::pack(y[mt][0][2], y[mt][0][3]);
      ya[I][mt][2] = TC::pack(y[mt][1][0], y[mt][1][1]);
      ya[I][mt][3] = TC::pack(y[mt][1][2], y[mt][1][3]);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ch = 64 * mt + 16 * warp + g + 8 * (e >> 1), tok = 16 * I + 8 * nt + 2 * t + (e & 1);
          Y[tok * C + ch] = y[mt][nt][e];
        }
    }
  }
}

}  // namespace

#define KDA2_BFS_CHECK(NAME, T, C)                                                                                   \
  extern "C" __global__ void __launch_bounds__(128) NAME(const float* Kp, const float* Tdiag, const float* beta,  \
                                                         const T* X, float* Y) {                                  \
    bfs<T, C>(Kp, Tdiag, beta, X, Y);                                                                             \
  }
KDA2_BFS_CHECK(kda2_bfs_check_bf16_c128, __nv_bfloat16, 128)
KDA2_BFS_CHECK(kda2_bfs_check_f16_c128, __half, 128)
KDA2_BFS_CHECK(kda2_bfs_check_bf16_c64, __nv_bfloat16, 64)
