// KDA² fused chunk forward for sm_90a, 16-token steps (issue 12; docs/DESIGN.md §1, "A fused kernel"): one CTA per
// (sequence, value head) walks the whole chain, and nothing lands in HBM between the inputs and o / ht — no workspace.
// Per 16-token chunk c (tokens i, j = 0..15, key channel d, Γ the in-chunk cumulative gate in log2 units):
//   producer phases, all 8 warps:
//     1. the gate activation and Γ (warpgroup 0, a thread per channel, with the channel's factors 2^(Γm−Γ0), 2^Γ0,
//        2^(Γ15−Γm), 2^Γ15 and whether it is kept, below); l2norm of q and k, β (warpgroup 1)
//     2. A' = [k_i·(k_j ⊙ 2^(Γi−Γj))] and Aqk' = [q_i·(k_j ⊙ 2^(Γi−Γj))] on tf32 mma.sync, each warp 16 channels,
//        against the chunk's middle row m = 8: 2^(Γi−Γm)·(1 / 2^(Γj−Γm)), both factors within 2^±DIAG_RANGE while the
//        channel's decay over either half is; a channel beyond that is left out of the mma and summed pairwise,
//        exactly (step 3) — every exponent taken there is ≤ 0, so the unbounded softplus gate needs no clamp. From
//        the same products and the channel's factors each lane emits qg = scale·q ⊙ 2^Γ, kg = k ⊙ 2^(Γ15−Γ) and
//        k ⊙ 2^Γ (all 16-bit): one ex2 and one reciprocal an element in all
//     3. the 8 warps' partial sums added; A = diag β A' (strictly lower), Aqk = scale Aqk' (j ≤ i)
//     4. T̃ = (I + A)⁻¹ diag β by forward substitution (fp32, one warp, a lane per column), stored tf32
//   consumer, each warpgroup its 64 value rows: Sᵀ (fp32, [v][k]) in wgmma accumulators, packed to 16 bits a k-step
//     at a time as the register A operand of R = vᵀ − Sᵀ (k ⊙ 2^Γ)ᵀ and oᵀ = Sᵀ qgᵀ; v_newᵀ = R T̃ᵀ (tf32, R from
//     registers) — v_new = T̃ (v − (k ⊙ 2^Γ) S) is u − w S with u = T̃ v and w = T̃ (k ⊙ 2^Γ), which are never made;
//     then oᵀ += v_newᵀ Aqkᵀ, Sᵀ ← Sᵀ diag(2^Γ15) + v_newᵀ kg with v_newᵀ from registers
// Producer and consumer take turns; the inputs of chunk c + 1 land (cp.async) while chunk c is computed, and two CTAs
// share an SM (≤ 128 registers a thread) — why Sᵀ's 16-bit copy is made two k-steps at a time, not whole: whole, in
// registers, it took 167 of them (one CTA an SM, 4.4 µs a step on the H100); staged whole in shared memory it cost
// 8 stmatrix, a fence and a warpgroup barrier a step: 1.13× this form's P3 time on the H100
// (experiments/2026-12-05-fused, calls 23–25). tests/kernels/fused_check.cu runs it, tests/gpu/test_fused_gpu.py
// holds it to the fp64 reference.
// K = V = 128, 16-bit inputs E (bf16 or fp16); the gate modes, l2norm, β sigmoid, varlen, GVA, h0 / ht in both
// layouts as KDA2RecurrentArgs asks (no split: a.split is not read).
#pragma once
#include <stdint.h>

#include "kda2/abi.h"
#include "kda2/bfs.cuh"
#include "kda2/chunk.cuh"
#include "kda2/elem16.cuh"
#include "kda2/gate.cuh"
#include "kda2/mma.cuh"
#include "kda2/wgmma.cuh"

namespace kda2::fused {

// D (+)= A · B, m64n16k8 tf32, A from registers (four fp32 values; the hardware reads their upper 19 bits), B K-major by
// descriptor, fp32 accumulate (the accumulator layout of kda2/wgmma.cuh WgmmaRS). A fragment of lane (g, t) of warp
// w: rows 16w + g (a0, a2) and 16w + g + 8 (a1, a3), columns t (a0, a1) and t + 4 (a2, a3), as mma.sync m16n8k8's.
__device__ __forceinline__ void wgmma_tf32_rs16(float (&d)[8], float a0, float a1, float a2, float a3, uint64_t desc_b,
                                                bool scale_d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %13, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7}, "
               "{%8,%9,%10,%11}, %12, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "r"(__float_as_uint(a0)), "r"(__float_as_uint(a1)), "r"(__float_as_uint(a2)),
                 "r"(__float_as_uint(a3)), "l"(desc_b), "r"(static_cast<int>(scale_d)));
#endif
}

// Descriptor of a K-major tile in 8-row × 16-byte core matrices with no swizzle: start `addr`, `lbo` bytes between
// core matrices adjacent in k, `sbo` bytes between 8-row groups (swizzle mode 0).
__device__ __forceinline__ uint64_t desc_plain(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  uint64_t d;
  asm("mov.b64 %0, {%1, %2};" : "=l"(d) : "r"(((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16)), "r"(sbo >> 4));
  return d;
}

template <class E>
struct Fused16 {
  static constexpr int K = 128, V = 128, C = 16, THREADS = 256, WARPS = THREADS / 32, CTAS_PER_SM = 2;
  // row strides: q / k / v tiles (E); Γ (fp32: a half-warp's 8-byte accesses of rows g, channels 2t, free of bank
  // conflicts); A (fp32: 16-byte rows for the substitution's row loads); a warpgroup's o block (E)
  static constexpr int LQ = K + 8, LG = K + 8, LA = C + 4, LO = 64 + 8;
  // factor tiles (1024-byte aligned descriptor tiles): k 2^Γ, qg, kg [token][channel] and Aqk [i][j] in
  // 128-byte-swizzled 16-row panels (kda2/wgmma.cuh panel128_offset); T̃ [i][j] tf32 in unswizzled core matrices
  // (tt_offset); 2^Γ15 [K] fp32
  static constexpr int F_K2 = 0, F_QG = F_K2 + C * K * 2, F_KG = F_QG + C * K * 2, F_AQ = F_KG + C * K * 2,
                       F_TT = F_AQ + C * 64 * 2, F_GL = F_TT + C * 64 * 2,
                       F_BYTES = (F_GL + K * 4 + 1023) / 1024 * 1024;
  // inputs as they land, per buffer (two, chunk c in c % 2): q, k (E), the raw gate (fp32, or E at the start of each
  // row), β; v (E) in a ring of three (chunk c in c % 3): the consumer reads chunk c's v after the step's last CTA
  // barrier, and chunk c + 2's copies are issued before the next step's first, so a third v tile is what keeps them
  // apart (two would let one warpgroup's copies overwrite a tile the other has still to read)
  static constexpr int R_Q = 0, R_K = R_Q + C * LQ * 2, R_G = R_K + C * LQ * 2, R_B = R_G + C * LG * 4,
                       R_BYTES = (R_B + C * 4 + 127) / 128 * 128, V_BYTES = C * LQ * 2;
  // the producer's partial sums of A' / Aqk' (8 warps × 2 × 16 × 16 fp32); each warpgroup's o block [token][v] (E)
  // lies over them at the end of a step
  static constexpr int RAW0 = F_BYTES, V0 = RAW0 + 2 * R_BYTES, PART = V0 + 3 * V_BYTES,
                       PART_BYTES = WARPS * 2 * C * C * 4,
                       S_A = PART + PART_BYTES, S_MASK = S_A + (C * LA * 4 + 127) / 128 * 128, S_CST = S_MASK + 128,
                       SMEM_BYTES = S_CST + K * 16;
  static_assert(F_QG % 1024 == 0 && F_KG % 1024 == 0 && F_AQ % 1024 == 0, "descriptor tiles at 1024-byte boundaries");
  static_assert(PART % 16 == 0 && 2 * C * LO * 2 <= PART_BYTES, "the o blocks fit over the partial sums");
  static_assert(CTAS_PER_SM * (SMEM_BYTES + 1024) <= 228 * 1024, "two CTAs an SM (1 KB reserved each, sm_90)");
  static_assert(C * K / 8 == THREADS, "a thread copies one 16-byte piece of each q / k / v tile");

  static __device__ __forceinline__ void run(const KDA2RecurrentArgs& a);

  // Byte offset of T̃[i][j] in its tile: the B operand of v_newᵀ = R T̃ᵀ on tf32 wgmmas (n = i, k = j), K-major 8 × 4
  // core matrices of 128 bytes, k-adjacent ones 128 bytes apart, 8-row groups 512; token j at k position
  // 8·(j / 8) + (j % 8) / 2 + 4·(j % 2), the order in which R's accumulators are the A fragments (consume)
  static __device__ __forceinline__ int tt_offset(int i, int j) {
    const int p = (j & ~7) | ((j & 7) >> 1) | ((j & 1) << 2);
    return (i >> 3) * 512 + (p >> 2) * 128 + (i & 7) * 16 + (p & 3) * 4;
  }
};

template <class E>
__device__ __forceinline__ void Fused16<E>::run(const KDA2RecurrentArgs& a) {
  using X = Elem16<E>;
  using TC = Tc16<E>;
  extern __shared__ __align__(1024) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int HV = a.HV, hv = blockIdx.x % HV, n = blockIdx.x / HV;
  const int h = HV == a.H ? hv : hv / (HV / a.H);
  const chunk::SeqBounds sb = chunk::seq_bounds(a, n);
  // (a sequence's length and its chunks fit 32 bits: the per-step index arithmetic stays 32-bit)
  const int len = static_cast<int>(sb.len), nch = (len + C - 1) / C;
  const bool g_bf16 = (a.flags & KDA2_G_BF16) != 0, beta16 = (a.flags & KDA2_BETA_BF16) != 0;
  const float scale = a.scale;
  if (tid == 0 && (smem_u32(smem) & 1023)) __trap();   // the descriptors' swizzle atoms need 1024-byte alignment

  // ---- the chunk's inputs into raw buffer b (cp.async, 16-byte pieces; rows past the sequence zero) and β into a
  //      register of threads 0..15, a chunk ahead
  // tokens of chunk c in the sequence (16 but in the last), computed once a step by the loop
  auto rows_of = [&](int c) { return len - C * c < C ? len - C * c : C; };
  // Thread tid copies piece tid % 16 of row tid / 16 of q, k and v, and of a 16-bit raw gate; an fp32 raw gate row is 32
  // pieces, two passes of 8 rows. (A piece index decoded per copy — divisions, selects of the tile — was 14 % of the
  // first form's instructions, ncu.) Its sources are pointers set once and advanced a chunk a step: the 64-bit index
  // arithmetic of each copy, the β load and the o store was ≈ 10 % of form r's instructions (ncu, H100, call 23).
  const int cr = tid >> 4, cpc = tid & 15;
  const int64_t tok0 = sb.bos;
  // q and k at (row cr, piece cpc), v likewise; the raw gate ([token][HV][K] as v is [token][HV][V], K = V) at v's
  // element offset if 16-bit, else at (row tid / 32, piece tid % 32) and 8 rows on: v's offset + g32 elements
  const E* src_qk = static_cast<const E*>(a.q) + ((tok0 + cr) * a.H + h) * K + 8 * cpc;
  const ptrdiff_t k_minus_q = static_cast<const E*>(a.k) - static_cast<const E*>(a.q);
  const E* src_v = static_cast<const E*>(a.v) + ((tok0 + cr) * HV + hv) * V + 8 * cpc;
  const int step_qk = C * a.H * K, step_v = C * HV * V, g32 = ((tid >> 5) - cr) * HV * K + 4 * (tid & 31) - 8 * cpc;
  auto issue = [&](int c, int rows, int b, uint32_t& bnext) {   // chunks in order, c = 0, 1, …: each call advances
    uint8_t* raw = smem + RAW0 + b * R_BYTES;
    uint8_t* vt = smem + V0 + (c % 3) * V_BYTES;
    const uint4 z = make_uint4(0, 0, 0, 0);
    const int qo = (cr * LQ + 8 * cpc) * 2;
    const int64_t at = src_v - static_cast<const E*>(a.v);   // v's element offset: the gate's too
    if (cr < rows) {
      cp_async16(smem_u32(raw + R_Q + qo), src_qk);
      cp_async16(smem_u32(raw + R_K + qo), src_qk + k_minus_q);
      cp_async16(smem_u32(vt + qo), src_v);
    } else {
      *reinterpret_cast<uint4*>(raw + R_Q + qo) = z;
      *reinterpret_cast<uint4*>(raw + R_K + qo) = z;
      *reinterpret_cast<uint4*>(vt + qo) = z;
    }
    if (g_bf16) {
      uint8_t* dst = raw + R_G + cr * LG * 4 + 16 * cpc;
      if (cr < rows) cp_async16(smem_u32(dst), static_cast<const E*>(a.g) + at);
      else *reinterpret_cast<uint4*>(dst) = z;
    } else {
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const int r = (tid >> 5) + 8 * m, pc = tid & 31;
        uint8_t* dst = raw + R_G + r * LG * 4 + 16 * pc;
        if (r < rows) cp_async16(smem_u32(dst), static_cast<const float*>(a.g) + at + g32 + m * 8 * HV * K);
        else *reinterpret_cast<uint4*>(dst) = z;
      }
    }
    src_qk += step_qk;
    src_v += step_v;
    if (tid < C && tid < rows) {
      const int64_t off = (tok0 + static_cast<int64_t>(C) * c + tid) * HV + hv;
      bnext = beta16 ? static_cast<uint32_t>(static_cast<const uint16_t*>(a.beta)[off])
                     : static_cast<const uint32_t*>(a.beta)[off];
    }
  };

  // ---- Sᵀ: S[4j + e] = Sᵀ[vr + 8·(e / 2)][8j + 2t + e % 2], warpgroup wg's value rows 64 wg .. 64 wg + 63
  const int vr = 64 * (warp >> 2) + 16 * (warp & 3) + g;
  const int64_t srow = (static_cast<int64_t>(n) * HV + hv) * K * V;
  float S[K / 2];
#pragma unroll
  for (int j = 0; j < K / 8; ++j) {
    const int k = 8 * j + 2 * t;
    if (!a.h0) {
      S[4 * j] = S[4 * j + 1] = S[4 * j + 2] = S[4 * j + 3] = 0.f;
    } else if (a.state_v_first) {
      const float2 lo = *reinterpret_cast<const float2*>(a.h0 + srow + vr * K + k);
      const float2 hi = *reinterpret_cast<const float2*>(a.h0 + srow + (vr + 8) * K + k);
      S[4 * j] = lo.x; S[4 * j + 1] = lo.y; S[4 * j + 2] = hi.x; S[4 * j + 3] = hi.y;
    } else {
      const float* h0 = a.h0 + srow;
      S[4 * j] = h0[k * V + vr];
      S[4 * j + 1] = h0[(k + 1) * V + vr];
      S[4 * j + 2] = h0[k * V + vr + 8];
      S[4 * j + 3] = h0[(k + 1) * V + vr + 8];
    }
  }

  // per-channel gate parameters of warpgroup 0's channel
  float a_log = 0.f, bias = 0.f;
  if (tid < K && a.gate_mode != KDA2_GATE_PRECOMPUTED) {
    if (a.flags & KDA2_HAS_A_LOG) a_log = a.A_log[hv];
    if (a.flags & KDA2_HAS_DT_BIAS) bias = a.dt_bias[hv * K + tid];
  }
  float* part = reinterpret_cast<float*>(smem + PART);
  float* sA = reinterpret_cast<float*>(smem + S_A);
  uint32_t* mask = reinterpret_cast<uint32_t*>(smem + S_MASK);
  E* o = static_cast<E*>(a.o);

  uint32_t bnext = 0u;
  if (nch > 0) issue(0, rows_of(0), 0, bnext);
  cp_async_commit();
  // The factors of chunk c from raw buffer c % 2, the inputs of chunk c + 1 issued first. Ends with the fence that makes
  // its tiles visible to the wgmmas; the caller's barrier publishes them.
  auto produce = [&](int c, int rows, int rows_next) {
    const int b = static_cast<int>(c & 1);
    const uint32_t bcur = bnext;
    bnext = 0u;
    if (rows_next > 0) issue(c + 1, rows_next, b ^ 1, bnext);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();   // chunk c's inputs have landed; chunk c − 1's consumer is done with the factors and its o tile
    uint8_t* raw = smem + RAW0 + b * R_BYTES;
    uint8_t* fac = smem;
    E* sQ = reinterpret_cast<E*>(raw + R_Q);
    E* sK = reinterpret_cast<E*>(raw + R_K);
    float* sG = reinterpret_cast<float*>(raw + R_G);
    float* sB = reinterpret_cast<float*>(raw + R_B);

    // ---- 1. gate and Γ (warpgroup 0: thread d owns channel d); β; l2norm of q and k (warpgroup 1)
    if (tid < K) {
      const int d = tid;
      float x[C];
#pragma unroll
      for (int r = 0; r < C; ++r)
        x[r] = g_bf16 ? X::to_f(reinterpret_cast<const E*>(sG + r * LG)[d]) : sG[r * LG + d];
      const int mode = a.gate_mode;
      const float a_scale = (mode != KDA2_GATE_PRECOMPUTED && (a.flags & KDA2_HAS_A_LOG)) ? __expf(a_log) : 1.f;
      const float post = gate_rows_log2<true, true>(x, mode, a_scale, bias, a.lower_bound);
      // a 16-bit raw row is overwritten by fp32 Γ: every gate thread has read its raw values first
      if (g_bf16) asm volatile("bar.sync 1, %0;\n" ::"n"(K) : "memory");
      if (rows < C) {   // the last chunk: rows past the sequence add nothing to Γ
#pragma unroll
        for (int r = 1; r < C; ++r) x[r] = r < rows ? x[r] : 0.f;
      }
      float acc = 0.f;
#pragma unroll
      for (int r = 0; r < C; ++r) {
        acc += x[r];
        x[r] = acc * post;
        sG[r * LG + d] = x[r];
      }
      // the channel's factors for step 2's emission (one ex2 each a channel, not a row): 2^(Γm − Γ0), scale 2^Γ0,
      // 2^(Γ15 − Γm), 2^Γ0, all ≤ 1, the first and third in range (≥ 2^−DIAG_RANGE) where the channel is kept; the
      // state's decay 2^Γ15
      const bool ok = fmaxf(x[0] - x[8], x[8] - x[15]) <= chunk::DIAG_RANGE;
      const uint32_t out = __ballot_sync(0xffffffffu, !ok);
      if (lane == 0) mask[warp] = out;
      // (per channel pair, as step 2's lanes read them: [2^(Γm−Γ0), 2^(Γ15−Γm)] and [scale 2^Γ0, 2^Γ0] of channels
      // 2p, 2p + 1)
      float* cst = reinterpret_cast<float*>(smem + S_CST) + 8 * (d >> 1) + (d & 1);
      const float p0 = ex2(x[0]);
      cst[0] = ex2(x[8] - x[0]);
      cst[2] = ex2(x[15] - x[8]);
      cst[4] = scale * p0;
      cst[6] = p0;
      reinterpret_cast<float*>(fac + F_GL)[d] = ex2(x[15]);
      if (tid < C) {
        float bi = beta16 ? X::lo(bcur) : __uint_as_float(bcur);
        if (a.flags & KDA2_BETA_SIGMOID) bi = sigmoid_stable(bi) * ((a.flags & KDA2_NEG_EIGVAL) ? 2.f : 1.f);
        sB[tid] = tid < rows ? bi : 0.f;
      }
    } else if (a.flags & KDA2_QK_L2NORM) {
      const int u = tid - K, row = u >> 2, s = u & 3;   // rows 0..15 q, 16..31 k; 4 lanes a row
      E* xr = (row < C ? sQ + row * LQ : sK + (row - C) * LQ);
      uint4 x4[4];
      float ss = 0.f;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        x4[m] = *reinterpret_cast<const uint4*>(xr + 8 * (s + 4 * m));
        const uint32_t* xw = reinterpret_cast<const uint32_t*>(&x4[m]);
#pragma unroll
        for (int e = 0; e < 4; ++e) { const float2 f = X::unpack(xw[e]); ss += f.x * f.x + f.y * f.y; }
      }
      ss += __shfl_xor_sync(0xffffffffu, ss, 1);
      ss += __shfl_xor_sync(0xffffffffu, ss, 2);
      const float rn = rsqrtf(ss + 1e-6f);
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        uint32_t* xw = reinterpret_cast<uint32_t*>(&x4[m]);
#pragma unroll
        for (int e = 0; e < 4; ++e) { const float2 f = X::unpack(xw[e]); xw[e] = X::pack(f.x * rn, f.y * rn); }
        *reinterpret_cast<uint4*>(xr + 8 * (s + 4 * m)) = x4[m];
      }
    }
    __syncthreads();   // Γ, β, q and k final

    // ---- 2. partial A' / Aqk' over this warp's 16 channels (two tf32 k-steps of 8), middle-row anchor; the lane's
    //         k columns t and t + 4 are channels c, c + 1 (any order of the channels sums the same), so its elements
    //         come in pairs and it emits them: qg = scale q 2^Γ, the residual's operand k 2^Γ and kg = k 2^(Γ15 − Γ),
    //         each from the products it holds and the channel's factors, in an order that keeps every factor ≤ 1 or in range
    //         (the prep's rule, docs/DESIGN.md §1); a left-out channel's directly (exponents ≤ 0)
    {
      float dA[2][4] = {}, dQ[2][4] = {};
      const float4* cst = reinterpret_cast<const float4*>(smem + S_CST);   // two a channel pair (step 1)
      E* sQG = reinterpret_cast<E*>(fac + F_QG);
      E* sKG = reinterpret_cast<E*>(fac + F_KG);
      E* sK2 = reinterpret_cast<E*>(fac + F_K2);
      // this warp's 16 channels' left-out bits, read once (the check after the products then waits on nothing)
      const uint32_t wout = (mask[warp >> 1] >> (16 * (warp & 1))) & 0xffffu;
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        const int da = 16 * warp + 8 * ks + 2 * t;   // and db = da + 1
        const uint32_t out = wout >> (8 * ks + 2 * t);
        const bool oka = !(out & 1u), okb = !(out & 2u);
        const float2 gm = *reinterpret_cast<const float2*>(sG + 8 * LG + da);
        const float4 cf = cst[da], cs = cst[da + 1];   // pair da / 2: (2^(Γm−Γ0), 2^(Γ15−Γm)) a, b; (scale 2^Γ0, 2^Γ0) a, b
        float kl[2][2], ql[2][2], kr[2][2];   // [row g, g + 8][channel da, db]
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int i = g + 8 * hr;
          const float2 gi = *reinterpret_cast<const float2*>(sG + i * LG + da);
          const float2 kk = X::unpack(*reinterpret_cast<const uint32_t*>(sK + i * LQ + da));
          const float2 qq = X::unpack(*reinterpret_cast<const uint32_t*>(sQ + i * LQ + da));
          const float ma = ex2(gi.x - gm.x), mb = ex2(gi.y - gm.y);
          kl[hr][0] = oka ? kk.x * ma : 0.f; kl[hr][1] = okb ? kk.y * mb : 0.f;
          ql[hr][0] = oka ? qq.x * ma : 0.f; ql[hr][1] = okb ? qq.y * mb : 0.f;
          kr[hr][0] = oka ? kk.x * rcp_normal(ma) : 0.f; kr[hr][1] = okb ? kk.y * rcp_normal(mb) : 0.f;
          // 2^(Γi − Γ0) = 2^(Γi − Γm) 2^(Γm − Γ0) ≤ 1, then 2^Γ0; 2^(Γ15 − Γi) = 2^(Γm − Γi) 2^(Γ15 − Γm)
          const float qa = ql[hr][0] * cf.x * cs.x, qb = ql[hr][1] * cf.y * cs.y;
          const float wa = kl[hr][0] * cf.x * cs.z, wb = kl[hr][1] * cf.y * cs.w;
          const float ga = kr[hr][0] * cf.z, gb = kr[hr][1] * cf.w;
          *reinterpret_cast<uint32_t*>(sQG + panel128_offset(i, da, C)) = TC::pack(qa, qb);
          *reinterpret_cast<uint32_t*>(sKG + panel128_offset(i, da, C)) = TC::pack(ga, gb);
          *reinterpret_cast<uint32_t*>(sK2 + panel128_offset(i, da, C)) = TC::pack(wa, wb);
        }
        const uint32_t aK[4] = {tf32_operand(kl[0][0]), tf32_operand(kl[1][0]), tf32_operand(kl[0][1]), tf32_operand(kl[1][1])};
        const uint32_t aQ[4] = {tf32_operand(ql[0][0]), tf32_operand(ql[1][0]), tf32_operand(ql[0][1]), tf32_operand(ql[1][1])};
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {   // columns j = 8 nt + g: this lane's own rows
          const uint32_t b0 = tf32_operand(kr[nt][0]), b1 = tf32_operand(kr[nt][1]);
          mma_tf32(dA[nt], aK, b0, b1);
          mma_tf32(dQ[nt], aQ, b0, b1);
        }
      }
      // a left-out channel's emitted elements (above: from zeros) again, directly (exponents ≤ 0); rare, a warp at
      // a time, after the products so that its registers are not held beside theirs
      if (wout) {
#pragma unroll 1
        for (int e = 0; e < 4; ++e) {
          const int d = 16 * warp + 8 * (e >> 1) + 2 * t + (e & 1);
          if (!((mask[d >> 5] >> (d & 31)) & 1u)) continue;
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            const int i = g + 8 * hr;
            const float gd = sG[i * LG + d], kd = X::to_f(sK[i * LQ + d]), x = ex2(gd);
            sQG[panel128_offset(i, d, C)] = TC::from_f(scale * X::to_f(sQ[i * LQ + d]) * x);
            sKG[panel128_offset(i, d, C)] = TC::from_f(kd * ex2(sG[15 * LG + d] - gd));
            sK2[panel128_offset(i, d, C)] = TC::from_f(kd * x);
          }
        }
      }
      float* pa = part + warp * 2 * C * C;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int j = 8 * nt + 2 * t;
        *reinterpret_cast<float2*>(pa + g * C + j) = make_float2(dA[nt][0], dA[nt][1]);
        *reinterpret_cast<float2*>(pa + (g + 8) * C + j) = make_float2(dA[nt][2], dA[nt][3]);
        *reinterpret_cast<float2*>(pa + C * C + g * C + j) = make_float2(dQ[nt][0], dQ[nt][1]);
        *reinterpret_cast<float2*>(pa + C * C + (g + 8) * C + j) = make_float2(dQ[nt][2], dQ[nt][3]);
      }
    }
    __syncthreads();   // partials and the left-out channels' mask

    // ---- 3. A = diag β A' (j < i), Aqk = scale Aqk' (j ≤ i); left-out channels pairwise, exactly
    {
      const int i = tid >> 4, j = tid & 15;
      float sa = 0.f, sq = 0.f;
#pragma unroll
      for (int w = 0; w < WARPS; ++w) {
        sa += part[w * 2 * C * C + tid];
        sq += part[w * 2 * C * C + C * C + tid];
      }
      // (selects, not products: the discarded j > i sums may be infinite)
      const uint4 m4 = *reinterpret_cast<const uint4*>(mask);
      if (m4.x | m4.y | m4.z | m4.w) {   // rare: one 16-byte load decides
#pragma unroll 1
        for (int wd = 0; wd < K / 32; ++wd) {
          uint32_t bits = mask[wd];
          while (bits) {
            const int d = 32 * wd + __ffs(bits) - 1;
            bits &= bits - 1;
            if (j <= i) {
              const float kj = X::to_f(sK[j * LQ + d]) * ex2(sG[i * LG + d] - sG[j * LG + d]);
              sa = fmaf(X::to_f(sK[i * LQ + d]), kj, sa);
              sq = fmaf(X::to_f(sQ[i * LQ + d]), kj, sq);
            }
          }
        }
      }
      sA[i * LA + j] = j < i ? sB[i] * sa : 0.f;
      reinterpret_cast<E*>(fac + F_AQ)[panel128_offset(i, j, C)] = X::from_f(j <= i ? scale * sq : 0.f);
    }
    __syncthreads();

    // ---- 4. T̃ = (I + A)⁻¹ diag β, column `lane` of warp 0, four partial sums a row (a chain of ~i / 4 dependent
    //         FMAs, not i)
    if (warp == 0) {
      if (lane < C) {
        const int col = lane;
        float x[C];
#pragma unroll
        for (int i = 0; i < C; ++i) {
          float s4[4] = {i == col ? 1.f : 0.f, 0.f, 0.f, 0.f};
#pragma unroll
          for (int j4 = 0; j4 < i; j4 += 4) {   // row i of A in 16-byte pieces (a broadcast load, not four)
            const float4 a4 = *reinterpret_cast<const float4*>(sA + i * LA + j4);
            const float ar[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (j4 + e < i) s4[e] = fmaf(-ar[e], x[j4 + e], s4[e]);
          }
          x[i] = (s4[0] + s4[1]) + (s4[2] + s4[3]);
        }
        const float bc = sB[col];
#pragma unroll
        for (int i = 0; i < C; ++i)
          *reinterpret_cast<uint32_t*>(fac + F_TT + tt_offset(i, col)) = tf32_operand(x[i] * bc);
      }
    }

    fence_proxy_async();   // k 2^Γ, qg, kg, Aqk, T̃: ordinary stores the wgmmas read
  };

  // ---- consumer: this warpgroup's 64 value rows of Sᵀ. R = vᵀ − Sᵀ(k 2^Γ)ᵀ and oᵀ = Sᵀqgᵀ with Sᵀ's 16-bit
  //      fragments as register A (a group a k-step), v_newᵀ = R T̃ᵀ (tf32, register A); oᵀ += v_newᵀ Aqkᵀ and
  //      Sᵀ += v_newᵀ kg (register A); o out.
  const int wg = warp >> 2, w4 = warp & 3;
  // the warpgroup's 128 threads (named barriers 1 and 2; immediate ids: a register id makes ptxas reserve all 16)
  auto wg_sync = [&] {
    if (wg) asm volatile("bar.sync 2, 128;\n" ::: "memory");
    else asm volatile("bar.sync 1, 128;\n" ::: "memory");
  };
  const uint32_t ostg = smem_u32(smem + PART + wg * (C * LO * 2));
  const uint32_t fb = smem_u32(smem);
  // this thread's 16-byte piece of o (token (tid % 128) / 8 of the chunk, value columns 64 wg + 8 (tid % 8)), advanced a
  // chunk a step
  E* dst_o = o + ((tok0 + ((tid & 127) >> 3)) * HV + hv) * V + 64 * wg + 8 * (tid & 7);
  const uint32_t k2_lo = desc_k128_lo((fb + F_K2) >> 4), q_lo = desc_k128_lo((fb + F_QG) >> 4);
  auto consume = [&](int c, int rows) {
    // R = vᵀ − Sᵀ (k 2^Γ)ᵀ, seeded with vᵀ from chunk c's raw tile: R[4jj + e] = (row vr + 8·(e / 2), token
    // 8jj + 2t + e % 2); then v_newᵀ = R T̃ᵀ — the same v_new as uᵀ − Sᵀwᵀ with u = T̃v, w = T̃(k 2^Γ), whose w and u
    // (a producer phase, a CTA barrier and uᵀ's round trip through shared memory) are not made
    const E* sV = reinterpret_cast<const E*>(smem + V0 + (c % 3) * V_BYTES);
    float R[8], P[8] = {}, O[8] = {};
#pragma unroll
    for (int e = 0; e < 8; ++e) R[e] = X::to_f(sV[(8 * (e >> 2) + 2 * t + (e & 1)) * LQ + vr + 8 * ((e >> 1) & 1)]);
    // Sᵀ's 16-bit A fragments from its own accumulators (a 16-bit m64n16k16 fragment is the accumulator's order packed),
    // two k-steps' sets in turn: a set is rewritten once the group that read it is done
    uint32_t A[2][4];
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) {
      uint32_t (&f)[4] = A[ks & 1];
      if (ks >= 2) wgmma_wait<1>();   // group ks − 2, the last to read this set
#pragma unroll
      for (int e = 0; e < 4; ++e) f[e] = TC::pack(S[8 * ks + 2 * e], S[8 * ks + 2 * e + 1]);
      wgmma_fence();
      WgmmaRS16<E, true>::run(R, f, desc128(k2_lo + k128_slice_bytes(16 * ks, C) / 16), true);   // R −= Sᵀ (k 2^Γ)ᵀ
      WgmmaRS16<E, false>::run(O, f, desc128(q_lo + k128_slice_bytes(16 * ks, C) / 16), true);   // oᵀ += Sᵀ qgᵀ
      wgmma_commit();
    }
    wgmma_wait<0>();
    wgmma_hold(O);
    wgmma_hold(R);
#pragma unroll
    for (int e = 0; e < 8; ++e) R[e] = __uint_as_float(tf32_operand(R[e]));   // rounded, not truncated, to tf32
    wgmma_fence();   // R was written by ordinary instructions
    // v_newᵀ = R T̃ᵀ on tf32: k-step s's A fragment is R[4s .. 4s + 3] (tokens 8s + 2t, 8s + 2t + 1 as its columns t,
    // t + 4: T̃'s tile has its tokens in that order, tt_offset)
#pragma unroll
    for (int s = 0; s < 2; ++s)
      wgmma_tf32_rs16(P, R[4 * s], R[4 * s + 2], R[4 * s + 1], R[4 * s + 3],
                      desc_plain(fb + F_TT + 256 * s, 128, 512), s > 0);
    wgmma_commit();
    {  // Sᵀ's columns decayed while P's products run on R
      const float* gl = reinterpret_cast<const float*>(smem + F_GL);
#pragma unroll
      for (int jj = 0; jj < K / 8; ++jj) {
        const float2 f = *reinterpret_cast<const float2*>(gl + 8 * jj + 2 * t);
        S[4 * jj] *= f.x; S[4 * jj + 1] *= f.y; S[4 * jj + 2] *= f.x; S[4 * jj + 3] *= f.y;
      }
    }
    wgmma_wait<0>();
    wgmma_hold(P);
    wgmma_hold(O);
    const uint32_t Vb[4] = {TC::pack(P[0], P[1]), TC::pack(P[2], P[3]), TC::pack(P[4], P[5]), TC::pack(P[6], P[7])};
    wgmma_fence();   // Vb and the decayed Sᵀ were written by ordinary instructions
    WgmmaRS16<E, false>::run(O, Vb, smem_desc_k128(fb + F_AQ, 0, C), true);        // oᵀ += v_newᵀ Aqkᵀ
    WgmmaRS<E, K, true>::run(S, Vb, smem_desc_mn128(fb + F_KG, 0, C), true);       // Sᵀ += v_newᵀ kg
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold(O);
    wgmma_hold(S);
    // o: oᵀ's 16 × 64 block through the warpgroup's o tile (over the partial sums, which step 3 read before the CTA
    // barrier and step 2 writes after the next) as [token][v], stmatrix .trans (lane 8m + r: token 8·(m / 2) + r, value
    // rows 8·(m % 2) of the warp's 16), then one 16-byte store a thread (8 scattered 2-byte stores a thread were 3.6 %
    // of the first form's instructions)
    {
      const uint32_t r4[4] = {TC::pack(O[0], O[1]), TC::pack(O[2], O[3]), TC::pack(O[4], O[5]), TC::pack(O[6], O[7])};
      stsm_x4_t(r4, ostg + 2 * ((8 * (lane >> 4) + (lane & 7)) * LO + 16 * w4 + 8 * ((lane >> 3) & 1)));
      wg_sync();
      const int tt = tid & 127, tok = tt >> 3, pc = tt & 7;
      const E* so = reinterpret_cast<const E*>(smem + PART + wg * (C * LO * 2));
      if (tok < rows) *reinterpret_cast<uint4*>(dst_o) = *reinterpret_cast<const uint4*>(so + tok * LO + 8 * pc);
      dst_o += step_v;
    }
  };

  for (int c = 0; c < nch; ++c) {
    const int rows = rows_of(c), rows_next = c + 1 < nch ? rows_of(c + 1) : 0;
    produce(c, rows, rows_next);
    __syncthreads();   // chunk c's factors are published
    consume(c, rows);
  }

  if (a.ht) {
    float* ht = a.ht + srow;
#pragma unroll
    for (int j = 0; j < K / 8; ++j) {
      const int k = 8 * j + 2 * t;
      if (a.state_v_first) {
        *reinterpret_cast<float2*>(ht + vr * K + k) = make_float2(S[4 * j], S[4 * j + 1]);
        *reinterpret_cast<float2*>(ht + (vr + 8) * K + k) = make_float2(S[4 * j + 2], S[4 * j + 3]);
      } else {
        ht[k * V + vr] = S[4 * j];
        ht[(k + 1) * V + vr] = S[4 * j + 1];
        ht[k * V + vr + 8] = S[4 * j + 2];
        ht[(k + 1) * V + vr + 8] = S[4 * j + 3];
      }
    }
  }
}

}  // namespace kda2::fused
