// One warpgroup solving a 64-token chunk's w (or u) as the prep's PREP_BFS variants do (kda2/bfs.cuh bfs_solve;
// docs/DESIGN.md §1, "What each of those changes costs in accuracy"; experiments/2026-12-05-prep-numerics, variant
// bfs-mixed): by blocked forward substitution over the four 16-token sub-chunks, transposed so that the C channels
// are the MMA's M,
//   R_I = X_I − Σ_{J<I} K'_IJ Y_J     register-A wgmma m64n16k16 (16-bit), A = Y_Jᵀ straight from the accumulators
//   Y_I = (T_II diag β_I) R_I          mma.sync m16n8k8 tf32, A = R_Iᵀ straight from the wgmma accumulators
// so Y = (I + diag β K')⁻¹ diag β X = T diag β X. Inputs: K' [64][64] fp32 (strictly lower; the A tile without β),
// T_II [64][16] fp32 (row 16I + i holds T_II's row i), β [64], X [64][C] 16-bit token-major; output Y [64][C]
// rounded to the input dtype as the prep stores it, returned as fp32. The K'_IJ blocks go into 16-bit 128-byte-
// swizzled K-major panels (one per sub-chunk I ≥ 1: 16 rows of 64 k, k = the column token; the identity that seeds
// each stage in panel 0's last 16 k), the wgmma's B operands. tests/test_wgmma.py compiles it (HGMMA, no local
// memory), tests/gpu/test_wgmma_gpu.py compares it with the rounding model and with an fp64 solve.
#include "kda2/bfs.cuh"
#include "kda2/elem16.cuh"

namespace {

template <class T, int C>
__device__ void bfs(const float* __restrict__ Kp, const float* __restrict__ Tdiag, const float* __restrict__ beta,
                    const T* __restrict__ X, float* __restrict__ Y) {
  using TC = kda2::Tc16<T>;
  constexpr int LDX = C + 8;   // a padded row, as the prep's tiles
  __shared__ __align__(1024) T sP[3 * kda2::BFS_PANEL_ELEMS];
  __shared__ __align__(16) T sX[64 * LDX];
  __shared__ __align__(16) uint32_t sTD[64 * 16];
  __shared__ __align__(16) T sY[C * 72];   // Y_Iᵀ staged [channel][token], as the prep stages uᵀ
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, lr = lane & 7, lm = lane >> 3;
  for (int p = tid; p < 3 * 16 * 48; p += 128) {
    const int I = p / (16 * 48) + 1, i = p / 48 % 16, j = p % 48;
    if (j < 16 * I) sP[(I - 1) * kda2::BFS_PANEL_ELEMS + kda2::panel128_offset(i, j, 16)] = TC::from_f(Kp[(16 * I + i) * 64 + j]);
  }
  if (tid < 32) kda2::bfs_identity_piece(sP, tid);
  for (int p = tid; p < 64 * C; p += 128) sX[p / C * LDX + p % C] = X[p];
  for (int p = tid; p < 64 * 16; p += 128) sTD[p] = kda2::tf32_operand(Tdiag[p] * beta[p / 256 * 16 + p % 16]);
  kda2::fence_proxy_async();   // ordinary stores, read by the async proxy
  __syncthreads();

  kda2::bfs_solve<T, C / 64>(sX, LDX, static_cast<uint32_t>(__cvta_generic_to_shared(sP)), sTD, 16, 0,
                             [&](int I, int mt, const uint32_t (&r4)[4]) {
    kda2::stsm_x4(r4, kda2::smem_u32(sY + (64 * mt + 16 * warp + 8 * (lm & 1) + lr) * 72 + 16 * I + 8 * (lm >> 1)));
  });
  __syncthreads();
  for (int p = tid; p < 64 * C; p += 128) Y[p] = kda2::Elem16<T>::to_f(sY[p % C * 72 + p / C]);
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
