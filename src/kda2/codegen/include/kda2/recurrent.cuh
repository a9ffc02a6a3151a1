// Fused recurrent KDA forward (docs/DESIGN.md §1): per (sequence, value head, V tile), token by token,
//   S <- diag(exp g_t) S;  S <- S + (beta_t k_t) (v_t - k_t^T S);  o_t = (scale q_t)^T S.
//
// Design notes: a warp owns VPW value columns of one (sequence, head) and all K key rows; lane l
// holds KPL = K/32 rows, so every reduction over K is a warp shuffle and the token loop needs no
// __syncthreads. k^T S and q^T S are reduced together on the decayed state, and the read-out uses
//   q^T S_new = q^T S_dec + (q.k) v'
// so one reduction round per token serves both. Next token's inputs are loaded before the
// current token's reduction so their latency hides behind the shuffles.
//
// Each variant's generated kernel.cu defines a config struct and one extern "C" entry per input dtype
// and state dtype that calls Kernel<Config, Elem, StateT>::run (Elem = __nv_bfloat16 or __half: q, k, v, o
// and 16-bit g / beta; StateT = float, or __nv_bfloat16 for the opt-in bf16 decode states: h0, ht and the
// per-token states in bf16, half the bytes, the arithmetic still fp32);
// the planner decides the config, this file holds no per-variant choice. Gate parameters A_log / dt_bias
// are fp32 or bf16 (KDA2_A_LOG_BF16 / KDA2_DT_BIAS_BF16), read as fp32. With args.intermediate set, the
// state after every token is also written there (speculative-decode rollback).
// Config members (all static constexpr):
//   int  K, V              head dims (K % 32 == 0)
//   int  WARPS, VPW        warps per CTA, value columns per warp
//   int  LANE_COLS         k_map=all: adjacent value columns per lane (one vector)
//   bool ALL_K, STRIDED    k_map: all (a lane owns columns, a share of K) / strided / blocked key rows
//   bool V_FIRST           states [V, K] (else [K, V])
//   bool SMEM_STAGING      state in/out through a shared-memory tile of row stride SMEM_STRIDE floats
//   int  SMEM_STRIDE       from the TIR bank-conflict pass (1 when not staged)
//   int  STAGE_ROW         k_map=all: row stride of the per-warp token stage, from the TIR pass
//   bool HAS_SOFTPLUS, HAS_LOWER_BOUND, HAS_L2NORM, HAS_BETA_SIGMOID, HAS_VARLEN   features compiled in
//   bool SCATTER           reduce-scatter over the warp, else xor all-reduce
//   bool PREFETCH          load the next token's inputs during the current token
//   bool INTERMEDIATE      write the state after every token to args.intermediate when it is set (decode-like
//                          buckets only: it costs ~18 registers in the prefill kernels)
//   int  PRELOAD           multi-token decode: the inputs of up to PRELOAD tokens copied to shared memory at CTA
//                          entry, beside the state loads (0: each token's inputs are loaded in the token loop)
//   bool PERSISTENT        loop over tiles (any grid; the library launches min(tiles, resident CTA slots)) and
//                          copy the next tile's state to shared memory while this one computes (Kernel::tiles)
//   int  PF_VEC, PF_ROW    persistent: the state copy buffer's piece width and row stride (elements), from the
//                          TIR pass (tir/recurrent.py prefetch_stage_func)
//   bool BULK              sm_90 decode: the state tile in and out of shared memory by bulk copies (Kernel::bulk_issue);
//                          a k_first tile by a tensor map (StateMaps: the entry's second parameter, the library
//                          encodes it per call), a v_first tile by one linear copy
//   int  BULK_PITCH        its shared row stride (elements): the tile's own row (the TIR plan keeps bulk tiles unpadded)
#pragma once
#include <cuda.h>   // CUtensorMap (the k_first bulk kernels' StateMaps)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kda2/abi.h"
#include "kda2/cp_async.cuh"
#include "kda2/elem16.cuh"
#include "kda2/gate.cuh"

namespace kda2 {
namespace recurrent {

// ---- helpers that do not depend on the config ----------------------------------------------------

// c ? a : b as one selp. Written in C, NVVM turns "c ? red[i] : red[i + h]" into a load through a
// selected address, which sends the whole red[] array to local memory (seen: 76-byte stack frame).
__device__ __forceinline__ float select_f32(bool c, float a, float b) {
  float r;
  asm("{ .reg .pred p; setp.ne.b32 p, %3, 0; selp.f32 %0, %1, %2, p; }" : "=f"(r) : "f"(a), "f"(b), "r"((int)c));
  return r;
}

// Vector memory helpers. Global state traffic goes through __ldcs/__stcs: the state is read once and
// written once per call (streaming, evict-first), and the intrinsics pin the 16-byte vector width that
// plain reinterpret_cast stores lost in NVVM here (seen as scalar STG.E in SASS). The default policy
// (__ldca/__stwb) made the direct decode kernels 3-25 % slower on the H200 (docs/DESIGN.md §2.2).
template <int N, bool GLOBAL_STREAM>
__device__ __forceinline__ void load_f32(const float* __restrict__ p, float (&out)[N]) {
  constexpr int CH = N % 4 == 0 ? 4 : (N % 2 == 0 ? 2 : 1);
#pragma unroll
  for (int c = 0; c < N; c += CH) {
    if constexpr (CH == 4) {
      const float4 x = GLOBAL_STREAM ? __ldcs(reinterpret_cast<const float4*>(p + c)) : *reinterpret_cast<const float4*>(p + c);
      out[c] = x.x; out[c + 1] = x.y; out[c + 2] = x.z; out[c + 3] = x.w;
    } else if constexpr (CH == 2) {
      const float2 x = GLOBAL_STREAM ? __ldcs(reinterpret_cast<const float2*>(p + c)) : *reinterpret_cast<const float2*>(p + c);
      out[c] = x.x; out[c + 1] = x.y;
    } else {
      out[c] = GLOBAL_STREAM ? __ldcs(p + c) : p[c];
    }
  }
}

template <int N, bool GLOBAL_STREAM>
__device__ __forceinline__ void store_f32(float* __restrict__ p, const float (&in)[N]) {
  constexpr int CH = N % 4 == 0 ? 4 : (N % 2 == 0 ? 2 : 1);
#pragma unroll
  for (int c = 0; c < N; c += CH) {
    if constexpr (CH == 4) {
      const float4 x = make_float4(in[c], in[c + 1], in[c + 2], in[c + 3]);
      if constexpr (GLOBAL_STREAM) __stcs(reinterpret_cast<float4*>(p + c), x); else *reinterpret_cast<float4*>(p + c) = x;
    } else if constexpr (CH == 2) {
      const float2 x = make_float2(in[c], in[c + 1]);
      if constexpr (GLOBAL_STREAM) __stcs(reinterpret_cast<float2*>(p + c), x); else *reinterpret_cast<float2*>(p + c) = x;
    } else {
      if constexpr (GLOBAL_STREAM) __stcs(p + c, in[c]); else p[c] = in[c];
    }
  }
}

// N 16-bit elements starting at p (2N-byte aligned) widened to fp32, in one or a few vector loads.
template <class E, int N>
__device__ __forceinline__ void load_e16(const E* __restrict__ p, float (&out)[N]) {
  using X = Elem16<E>;
  if constexpr (N % 8 == 0) {
#pragma unroll
    for (int c = 0; c < N; c += 8) {
      const uint4 w = *reinterpret_cast<const uint4*>(p + c);
      out[c] = X::lo(w.x); out[c + 1] = X::hi(w.x); out[c + 2] = X::lo(w.y); out[c + 3] = X::hi(w.y);
      out[c + 4] = X::lo(w.z); out[c + 5] = X::hi(w.z); out[c + 6] = X::lo(w.w); out[c + 7] = X::hi(w.w);
    }
  } else if constexpr (N == 4) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    out[0] = X::lo(w.x); out[1] = X::hi(w.x); out[2] = X::lo(w.y); out[3] = X::hi(w.y);
  } else if constexpr (N == 2) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(p);
    out[0] = X::lo(w); out[1] = X::hi(w);
  } else {
#pragma unroll
    for (int c = 0; c < N; ++c) out[c] = X::to_f(p[c]);
  }
}

template <class E, int N>
__device__ __forceinline__ void store_e16(E* __restrict__ p, const float (&in)[N]) {
  using X = Elem16<E>;
  if constexpr (N % 8 == 0) {
#pragma unroll
    for (int c = 0; c < N; c += 8)
      __stcs(reinterpret_cast<uint4*>(p + c), make_uint4(X::pack(in[c], in[c + 1]), X::pack(in[c + 2], in[c + 3]),
                                                         X::pack(in[c + 4], in[c + 5]), X::pack(in[c + 6], in[c + 7])));
  } else if constexpr (N == 4) {
    __stcs(reinterpret_cast<uint2*>(p), make_uint2(X::pack(in[0], in[1]), X::pack(in[2], in[3])));
  } else if constexpr (N == 2) {
    __stcs(reinterpret_cast<unsigned int*>(p), X::pack(in[0], in[1]));
  } else {
#pragma unroll
    for (int c = 0; c < N; ++c) p[c] = X::from_f(in[c]);
  }
}

// A gate parameter (A_log, dt_bias): fp32, or bf16 when the flag says so; read as fp32 (as FLA does). A kernel
// body is compiled twice (Kernel::run): P16 = false reads fp32 only, as the kernels did before bf16 parameters
// existed; P16 = true serves calls with any bf16 parameter. One body with a runtime choice here made the decode
// kernels up to 19 % slower at N = 256 even for fp32 parameters (ncu and the decode benchmark on the H200:
// bench/results/h200-2026-11-30-final/decode_bisect.md, experiments/2026-12-01-classes): the per-head prologue's
// loads are on the critical path of a one-token CTA.
template <bool P16>
__device__ __forceinline__ float load_param(const float* __restrict__ p, long i, bool bf16) {
  if constexpr (!P16) return p[i];
  return bf16 ? __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]) : p[i];
}

// State element access: fp32 states through the fp32 helpers above; bf16 states (the opt-in decode form)
// widened on load and rounded on store, with the same streaming vector widths in half the bytes.
template <class S, int N>
__device__ __forceinline__ void ld_state(const S* __restrict__ p, float (&out)[N]) {
  if constexpr (sizeof(S) == 4) {
    load_f32<N, true>(reinterpret_cast<const float*>(p), out);
  } else {
    using X = Elem16<__nv_bfloat16>;
    if constexpr (N % 8 == 0) {
#pragma unroll
      for (int c = 0; c < N; c += 8) {
        const uint4 w = __ldcs(reinterpret_cast<const uint4*>(p + c));
        out[c] = X::lo(w.x); out[c + 1] = X::hi(w.x); out[c + 2] = X::lo(w.y); out[c + 3] = X::hi(w.y);
        out[c + 4] = X::lo(w.z); out[c + 5] = X::hi(w.z); out[c + 6] = X::lo(w.w); out[c + 7] = X::hi(w.w);
      }
    } else if constexpr (N % 4 == 0) {
#pragma unroll
      for (int c = 0; c < N; c += 4) {
        const uint2 w = __ldcs(reinterpret_cast<const uint2*>(p + c));
        out[c] = X::lo(w.x); out[c + 1] = X::hi(w.x); out[c + 2] = X::lo(w.y); out[c + 3] = X::hi(w.y);
      }
    } else if constexpr (N % 2 == 0) {
#pragma unroll
      for (int c = 0; c < N; c += 2) {
        const unsigned int w = __ldcs(reinterpret_cast<const unsigned int*>(p + c));
        out[c] = X::lo(w); out[c + 1] = X::hi(w);
      }
    } else {
#pragma unroll
      for (int c = 0; c < N; ++c) out[c] = __bfloat162float(p[c]);
    }
  }
}

template <class S, int N>
__device__ __forceinline__ void st_state(S* __restrict__ p, const float (&in)[N]) {
  if constexpr (sizeof(S) == 4) {
    store_f32<N, true>(reinterpret_cast<float*>(p), in);
  } else {
    using X = Elem16<__nv_bfloat16>;
    if constexpr (N % 8 == 0) {
#pragma unroll
      for (int c = 0; c < N; c += 8)
        __stcs(reinterpret_cast<uint4*>(p + c), make_uint4(X::pack(in[c], in[c + 1]), X::pack(in[c + 2], in[c + 3]),
                                                           X::pack(in[c + 4], in[c + 5]), X::pack(in[c + 6], in[c + 7])));
    } else if constexpr (N % 4 == 0) {
#pragma unroll
      for (int c = 0; c < N; c += 4)
        __stcs(reinterpret_cast<uint2*>(p + c), make_uint2(X::pack(in[c], in[c + 1]), X::pack(in[c + 2], in[c + 3])));
    } else if constexpr (N % 2 == 0) {
#pragma unroll
      for (int c = 0; c < N; c += 2) __stcs(reinterpret_cast<unsigned int*>(p + c), X::pack(in[c], in[c + 1]));
    } else {
#pragma unroll
      for (int c = 0; c < N; ++c) p[c] = __float2bfloat16_rn(in[c]);
    }
  }
}

template <class S>
__device__ __forceinline__ float4 ld_state4(const S* __restrict__ p) {
  if constexpr (sizeof(S) == 4) {
    return __ldcs(reinterpret_cast<const float4*>(p));
  } else {
    float x[4];
    ld_state<S, 4>(p, x);
    return make_float4(x[0], x[1], x[2], x[3]);
  }
}

template <class S>
__device__ __forceinline__ void st_state4(S* __restrict__ p, float4 v) {
  if constexpr (sizeof(S) == 4) {
    __stcs(reinterpret_cast<float4*>(p), v);
  } else {
    const float x[4] = {v.x, v.y, v.z, v.w};
    st_state<S, 4>(p, x);
  }
}

template <class S>
__device__ __forceinline__ float ld_state1(const S* p) {
  if constexpr (sizeof(S) == 4) return *reinterpret_cast<const float*>(p); else return __bfloat162float(*p);
}
template <class S>
__device__ __forceinline__ void st_state1(S* p, float x) {
  if constexpr (sizeof(S) == 4) *reinterpret_cast<float*>(p) = x; else *p = __float2bfloat16_rn(x);
}

// N state elements from shared memory (the persistent copy buffer), widened to fp32.
template <class S, int N>
__device__ __forceinline__ void ld_state_smem(const S* p, float (&out)[N]) {
  if constexpr (sizeof(S) == 4) {
    load_f32<N, false>(reinterpret_cast<const float*>(p), out);
  } else {
    using X = Elem16<__nv_bfloat16>;
    static_assert(N == 1 || N == 2 || N == 4, "pieces of at most 4 elements");
    if constexpr (N == 4) {
      const uint2 w = *reinterpret_cast<const uint2*>(p);
      out[0] = X::lo(w.x); out[1] = X::hi(w.x); out[2] = X::lo(w.y); out[3] = X::hi(w.y);
    } else if constexpr (N == 2) {
      const unsigned int w = *reinterpret_cast<const unsigned int*>(p);
      out[0] = X::lo(w); out[1] = X::hi(w);
    } else {
      out[0] = __bfloat162float(*p);
    }
  }
}

// ---- the kernel, on a config struct --------------------------------------------------------------

// The k_first bulk kernels' second parameter (a __grid_constant__ kernel parameter; library.cpp.j2 encode_state_maps):
// h0 and ht as 3-D tensors {V, K, states} (states = pool rows x HV, a row's heads consecutive), a box of {BV, K, 1}
// elements, no swizzle: one tensor copy moves a tile of K rows of BV columns, which as linear copies took one copy
// per 256-B row, served at the copy engine's per-copy rate (130.9 vs 76.7 us by direct loads at N = 64, kda2 tune,
// H200, 2026-12-01).
struct StateMaps {
  CUtensorMap in, out;
};

template <class Cfg, class E, class SE = float>
struct Kernel {
  using X = Elem16<E>;
  static constexpr int K = Cfg::K;
  static constexpr int V = Cfg::V;
  static constexpr int WARPS = Cfg::WARPS;
  static constexpr bool PREFETCH = Cfg::PREFETCH;    // decode-only variants skip the next-token pipeline
  static constexpr bool INTERMEDIATE = Cfg::INTERMEDIATE;  // per-token states compiled in
  static constexpr int VPW = Cfg::VPW;               // value columns per warp
  static constexpr int BV = WARPS * VPW;             // value columns per CTA
  static constexpr int KPL = K / 32;                 // key rows per lane
  static constexpr bool ALL_K = Cfg::ALL_K;          // a lane owns value columns, a share of the K rows
  static constexpr bool STRIDED = Cfg::STRIDED;
  static constexpr bool V_FIRST = Cfg::V_FIRST;
  static constexpr bool SMEM_STAGING = Cfg::SMEM_STAGING;
  static constexpr int SMEM_STRIDE = Cfg::SMEM_STRIDE;
  static constexpr bool HAS_SOFTPLUS = Cfg::HAS_SOFTPLUS;
  static constexpr bool HAS_LOWER_BOUND = Cfg::HAS_LOWER_BOUND;
  static constexpr bool HAS_L2NORM = Cfg::HAS_L2NORM;
  static constexpr bool HAS_BETA_SIGMOID = Cfg::HAS_BETA_SIGMOID;
  static constexpr bool HAS_VARLEN = Cfg::HAS_VARLEN;
  static constexpr bool SCATTER = Cfg::SCATTER;      // reduce-scatter, else xor all-reduce
  static constexpr int LOG2_M = VPW == 2 ? 2 : VPW == 4 ? 3 : VPW == 8 ? 4 : VPW == 16 ? 5 : 0;  // M = 2*VPW values to scatter
  static constexpr int SCATTER_SHIFT = 5 - LOG2_M;   // lane >> SHIFT = index of the sum a lane ends with
  static constexpr int NRED = 2 * VPW + 3;           // k^T S, q^T S per column, then |q|^2, |k|^2, q.k
  static constexpr int FILL_TOTAL = K * (BV / 4);    // float4s in one CTA's state tile
  static constexpr int FILL_ITERS = (FILL_TOTAL + WARPS * 32 - 1) / (WARPS * 32);
  // k_map = all (see run_all_k)
  static constexpr int CW = Cfg::LANE_COLS;          // adjacent value columns per lane (one vector)
  static constexpr int CGROUPS = ALL_K ? VPW / CW : 32;  // lanes across the warp's columns
  static constexpr int KSPLIT = 32 / CGROUPS;        // lanes sharing those columns, each a share of K
  static constexpr int RPL = K / KSPLIT;             // key rows per lane
  static constexpr int STAGE_ROW = Cfg::STAGE_ROW;   // k_map=all token stage row stride: the TIR stage's decision
  static_assert(!ALL_K || (STAGE_ROW >= RPL && STAGE_ROW % 4 == 0), "stage rows hold RPL floats, 16-byte aligned");
  // Persistent: a lane's share of a tile's state is PF_RUNS runs of PF_RUN contiguous elements (the vectors the
  // direct loads read); the copy buffer holds run m, piece p (PF_VEC elements) of thread t at row m * PF_PIECES
  // + p, column t * PF_VEC: consecutive threads' pieces are adjacent, and each thread reads back only its own.
  static constexpr bool PERSISTENT = Cfg::PERSISTENT;
  static constexpr int PF_RUN = ALL_K ? CW : V_FIRST ? (STRIDED ? 1 : KPL) : VPW;
  static constexpr int PF_RUNS = ALL_K ? RPL : V_FIRST ? (STRIDED ? VPW * KPL : VPW) : KPL;
  static constexpr int PF_VEC = Cfg::PF_VEC;
  static constexpr int PF_ROW = Cfg::PF_ROW;
  static constexpr int PF_PIECES = PF_RUN / PF_VEC;
  static constexpr int PF_ELEMS = PERSISTENT ? PF_RUNS * PF_PIECES * PF_ROW : 1;
  static_assert(!PERSISTENT || (!SMEM_STAGING && PF_RUN % PF_VEC == 0 && PF_VEC <= 4 && PF_ROW % PF_VEC == 0 &&
                                PF_ROW >= WARPS * 32 * PF_VEC),
                "persistent: direct staging; the copy buffer's rows hold a piece per thread (TIR plan)");

  static_assert(K % 32 == 0, "K must be a multiple of 32");
  static_assert(!ALL_K || (VPW % CW == 0 && 32 % (VPW / CW) == 0 && !V_FIRST && !SMEM_STAGING),
                "k_map=all: lane column groups must tile the warp; k_first, direct staging only");
  static_assert(V % BV == 0, "V must be a multiple of the CTA's value tile");
  static_assert(!SMEM_STAGING || (BV % 4 == 0 && !V_FIRST), "smem staging is built for k_first tiles of whole float4s");

  // Preload (multi-token decode): one buffer per CTA, since every warp of a CTA serves the same (sequence, head) and
  // reads the same q, k and g rows. Regions, each 16-byte aligned: q rows [PRELOAD][K] and k rows [PRELOAD][K] in
  // the input dtype; g rows [PRELOAD][K] fp32 (16-bit g packed at the front, PRELOAD rows of K); this CTA's BV
  // columns of v [PRELOAD][BV]; beta [PRELOAD] widened to fp32. No pad: the token loop reads a row by consecutive
  // lanes (one wavefront per 128 bytes) or one address per warp (broadcast), so no layout has fewer wavefronts.
  static constexpr int PRELOAD = Cfg::PRELOAD;
  static constexpr int PL_K = PRELOAD * K * 2;                       // byte offsets of the regions
  static constexpr int PL_G = 2 * PL_K;
  static constexpr int PL_V = PL_G + PRELOAD * K * 4;
  static constexpr int PL_B = PL_V + (PRELOAD * BV * 2 + 15) / 16 * 16;
  static constexpr int PL_BYTES = PL_B + (PRELOAD * 4 + 15) / 16 * 16;
  static constexpr int V_PIECE = (BV * 2) % 16 == 0 ? 16 : (BV * 2) % 8 == 0 ? 8 : 4;  // cp.async size for v rows
  static_assert(PRELOAD == 0 || (!PREFETCH && PRELOAD <= WARPS * 32 && (BV * 2) % 4 == 0),
                "preload replaces the next-token prefetch; one thread per token's beta; v rows in 4-byte pieces");

  // Bulk staging (sm_90 decode kernels): the CTA's state tile comes into shared memory by bulk copies on an mbarrier
  // and leaves by bulk copies; the threads move it between shared memory and registers once each way. The copy
  // engine, not the threads' registers, then holds the bytes in flight: an in-place read and write of a D2-size
  // state pool on the H200 reached 90 % of the 1 GiB copy by bulk copies of 16 KB tiles and 84 % by 16-byte loads
  // and stores of the same tiles, in one run (experiments/2026-12-01-decode/copy_ceiling.cu). Tile rows are the
  // state's rows (v_first: BV value rows of K; k_first: K key rows of BV), back to back in shared memory; one copy
  // each way: linear for a v_first tile (contiguous in the state), a tensor-map box for a k_first one (StateMaps).
  static constexpr bool BULK = Cfg::BULK;
  static constexpr bool TMAP = BULK && !V_FIRST;    // k_first tiles move by the tensor maps (StateMaps)
  static constexpr int BK_ROWS = V_FIRST ? BV : K;
  static constexpr int BK_ROW = V_FIRST ? K : BV;
  static constexpr int BK_PITCH = Cfg::BULK_PITCH;
  static constexpr unsigned BK_BYTES = BK_ROWS * BK_ROW * sizeof(SE);
  static_assert(!BULK || (!PERSISTENT && !SMEM_STAGING && BK_PITCH == BK_ROW && (BK_ROW * sizeof(SE)) % 16 == 0 &&
                          BK_ROWS <= 256),
                "bulk staging: one unpadded tile per CTA (one linear copy or one tensor-map box: the box lands its "
                "rows back to back), rows of whole 16-byte pieces, at most 256 of them (a box dimension)");

  static __device__ __forceinline__ int key_row(int lane, int i) { return STRIDED ? lane + 32 * i : lane * KPL + i; }
  // The q / k head of value head hv (GVA: HV / H value heads share one). Without GVA no division: the two integer
  // divisions were 4.6 % of a D3 k_first kernel's instructions (H200, ncu, bench/results/h200-2026-12-02-ring/call1).
  static __device__ __forceinline__ int q_head(const KDA2RecurrentArgs& a, int hv) {
    return a.HV == a.H ? hv : hv / (a.HV / a.H);
  }

  // Scatter reduction: lane l ends with sum number (l >> SCATTER_SHIFT) of the 2*VPW; sums 0..VPW-1 are
  // k^T S of columns 0..VPW-1 (lanes 0-15), sums VPW.. are q^T S (lanes 16-31, same column order).
  static __device__ __forceinline__ int scatter_col(int lane) { return (lane >> SCATTER_SHIFT) & (VPW - 1); }

  // One CTA's work: V-block vb of the state of sequence n, value head hv; srow its state row (state_indices[n],
  // or n), < 0 for a padding slot and for "no tile" (the persistent loop's end).
  struct TileAt {
    int vb, hv, n, srow;
  };

  // The KPL key-row elements of this lane from a [.., K] row: one vector when rows are blocked.
  static __device__ __forceinline__ void load_rows_e(const E* __restrict__ row, int lane, float (&out)[KPL]) {
    if constexpr (STRIDED) {
#pragma unroll
      for (int i = 0; i < KPL; ++i) out[i] = X::to_f(row[lane + 32 * i]);
    } else {
      load_e16<E, KPL>(row + lane * KPL, out);
    }
  }

  static __device__ __forceinline__ void load_rows_gate(const void* __restrict__ g, long base, bool half, int lane, float (&out)[KPL]) {
    if (half) {
      load_rows_e(reinterpret_cast<const E*>(g) + base, lane, out);
    } else if constexpr (STRIDED) {
      const float* p = reinterpret_cast<const float*>(g) + base;
#pragma unroll
      for (int i = 0; i < KPL; ++i) out[i] = p[lane + 32 * i];
    } else {
      load_f32<KPL, false>(reinterpret_cast<const float*>(g) + base + lane * KPL, out);
    }
  }

  // Round STEP of the reduce-scatter: lanes whose bit (16 >> STEP) is set keep the upper half of what they
  // carry and send the lower half to their partner. Recursion (not a loop) so every index is a constant.
  template <int STEP>
  static __device__ __forceinline__ void scatter_rounds(float (&red)[NRED], int lane) {
    if constexpr (STEP < LOG2_M) {
      constexpr int OFF = 16 >> STEP, HALF = VPW >> STEP;  // HALF = 2*VPW / 2^(STEP+1)
      const bool upper = (lane & OFF) != 0;
#pragma unroll
      for (int i = 0; i < HALF; ++i) {
        const float send = select_f32(upper, red[i], red[i + HALF]);
        const float keep = select_f32(upper, red[i + HALF], red[i]);
        red[i] = keep + __shfl_xor_sync(0xffffffffu, send, OFF);
      }
      scatter_rounds<STEP + 1>(red, lane);
    }
  }

  // Per-lane inputs of one token. With the scatter reduction a lane needs only the one value column whose
  // k^T S it ends up holding, so v is a single element there (a partly written array here would be
  // copied through local memory by `cur = nxt`).
  struct TokenIn {
    float q[KPL], k[KPL], g[KPL], v[SCATTER ? 1 : VPW], beta;
  };

  // NV == 1: this lane's scatter column only; otherwise the warp's VPW columns (a template on NV, so
  // the branch not taken is never instantiated).
  template <int NV>
  static __device__ __forceinline__ void load_v(const E* __restrict__ row, int lane, float (&v)[NV]) {
    if constexpr (NV == 1) v[0] = X::to_f(row[scatter_col(lane)]);
    else load_e16<E, NV>(row, v);
  }

  static __device__ __forceinline__ void load_token(const KDA2RecurrentArgs& a, long tok, int h, int hv, int v0, int lane, TokenIn& in) {
    const long qk_base = (tok * a.H + h) * (long)K;
    load_rows_e(reinterpret_cast<const E*>(a.q) + qk_base, lane, in.q);
    load_rows_e(reinterpret_cast<const E*>(a.k) + qk_base, lane, in.k);
    load_rows_gate(a.g, (tok * a.HV + hv) * (long)K, (a.flags & KDA2_G_BF16) != 0, lane, in.g);
    load_v(reinterpret_cast<const E*>(a.v) + (tok * a.HV + hv) * (long)V + v0, lane, in.v);
    const long bi = tok * a.HV + hv;
    in.beta = (a.flags & KDA2_BETA_BF16) ? X::to_f(reinterpret_cast<const E*>(a.beta)[bi])
                                         : reinterpret_cast<const float*>(a.beta)[bi];
  }

  // ---- preload (PRELOAD > 0): every token's inputs in shared memory before the token loop -------------------
  // A multi-token decode CTA otherwise waits on each token's q/k/g/v/beta loads inside its serial token chain (T
  // round trips to memory per chain, with only a few CTAs per SM to hide them); issued at entry, beside the state
  // loads, their latency overlaps the state's and the chain touches only shared memory and registers.

  // Rows of ROW bytes (row t at src + t * stride bytes) to shared memory (row t at dst + t * ROW) for t < nt, in
  // PIECE-byte cp.async copies spread over the CTA's threads. Sources are 16-byte aligned: the inputs' base
  // addresses are (the chunk kernels' cp.async copies assume the same), and every row offset is a multiple of PIECE.
  template <int ROW, int PIECE>
  static __device__ __forceinline__ void copy_rows(unsigned char* dst, const unsigned char* src, long stride, int nt) {
    static_assert(ROW % PIECE == 0, "whole pieces per row");
    constexpr int PER_ROW = ROW / PIECE, NT = WARPS * 32;
#pragma unroll
    for (int it = 0; it < (PRELOAD * PER_ROW + NT - 1) / NT; ++it) {
      const int i = it * NT + threadIdx.x, t = i / PER_ROW, p = i % PER_ROW;
      if (t < nt) cp_async<PIECE>(dst + t * ROW + p * PIECE, src + t * stride + p * PIECE);
    }
  }

  // Issues the copies of tokens tok .. tok + nt - 1 (nt <= PRELOAD) of this CTA's (sequence, head h / hv, value
  // columns v_cta ..): nothing waits here. beta (16-bit is below cp.async's 4-byte granule) is loaded into a
  // register of thread t for token t and stored by land_block, after the caller has issued its state loads.
  // (H, HV: a.H and a.HV, passed so that a refill can hand over copies the compiler cannot hoist: see land_block)
  static __device__ __forceinline__ float preload_issue(const KDA2RecurrentArgs& a, long tok, int nt, int h, int hv,
                                                        int v_cta, int H, int HV) {
    float b = 0.f;
    if ((int)threadIdx.x < nt) {
      const long bi = (tok + threadIdx.x) * HV + hv;
      b = (a.flags & KDA2_BETA_BF16) ? X::to_f(reinterpret_cast<const E*>(a.beta)[bi])
                                     : reinterpret_cast<const float*>(a.beta)[bi];
    }
    unsigned char* s = preload_smem();
    const long qk = (tok * H + h) * (long)K * 2, stride_qk = (long)H * K * 2;
    copy_rows<K * 2, 16>(s, reinterpret_cast<const unsigned char*>(a.q) + qk, stride_qk, nt);
    copy_rows<K * 2, 16>(s + PL_K, reinterpret_cast<const unsigned char*>(a.k) + qk, stride_qk, nt);
    const long grow = (tok * HV + hv) * (long)K;
    if (a.flags & KDA2_G_BF16)
      copy_rows<K * 2, 16>(s + PL_G, reinterpret_cast<const unsigned char*>(a.g) + grow * 2, (long)HV * K * 2, nt);
    else
      copy_rows<K * 4, 16>(s + PL_G, reinterpret_cast<const unsigned char*>(a.g) + grow * 4, (long)HV * K * 4, nt);
    copy_rows<BV * 2, V_PIECE>(s + PL_V, reinterpret_cast<const unsigned char*>(a.v) + ((tok * HV + hv) * (long)V + v_cta) * 2,
                               (long)HV * V * 2, nt);
    cp_async_commit();  // one group: a persistent kernel waits for it apart from its next tile's state copies
    return b;
  }

  // ---- prepared tokens (PRELOAD > 0) --------------------------------------------------------------------
  // Every warp of a CTA serves the same (sequence, head), so what a token step needs that does not depend on the
  // state — the decay exp(g) after the gate activation, the l2 norms' 1/|q| and 1/|k|, q̂·k̂ and the activated beta —
  // is computed once per CTA, a warp per token, right after the copies land and while the state loads are still in
  // flight, into a table in shared memory. The token chain then reads it: no norm shuffles, no gate math and no
  // per-warp stage writes in the serial part (the per-token kernels do all of it in every warp, every step). The
  // blocked / strided maps read q and k as copied and apply the norms to the sums over K (q̂ᵀS = rq·qᵀS) and to v'.
  // Table: per token slot u TROWS rows of TROW floats (k_map = all: q̂, k̂, decay; else the decay), key row r at
  // row_at(r) — for k_map = all the per-warp stage's layout (row stride STAGE_ROW, the TIR stage's choice,
  // tir/recurrent.py all_k_stage_func: its store pattern is the one a preparing warp uses, lane l writing rows
  // l + 32 i), else row-major — then the scalars [PRELOAD][4] (rq, rk, q̂·k̂, beta). A call longer than PRELOAD tokens
  // refills the buffer and the table every PRELOAD tokens (land_block): a serving call stays within its bucket, a
  // longer one is correct at any length.
  static constexpr int TROW = ALL_K ? KSPLIT * STAGE_ROW : K;
  // k_map = all: q̂ and k̂ rows too (fp32, normalised, before the decay row): its step reads RPL-element rows, which
  // as 16-bit copies cost a widening per element per token; the other maps read KPL elements, widened either way.
  static constexpr int TROWS = ALL_K ? 3 : 1;
  static constexpr int TB_SCAL = PRELOAD * TROWS * TROW;
  static constexpr int TB_FLOATS = TB_SCAL + PRELOAD * 4;
  static __device__ __forceinline__ int row_at(int r) { return ALL_K ? (r / RPL) * STAGE_ROW + r % RPL : r; }
  static __device__ __forceinline__ float (&table_smem())[PRELOAD ? TB_FLOATS : 4] {
    __shared__ __align__(16) float tb[PRELOAD ? TB_FLOATS : 4];
    return tb;
  }
  // The gate's per-head constants for key rows lane + 32 i (the rows a preparing lane owns).
  struct GateRows {
    float mul, dtb[KPL];
  };
  template <bool P16>
  static __device__ __forceinline__ GateRows gate_rows(const KDA2RecurrentArgs& a, int hv, int lane) {
    GateRows gr;
    gr.mul = 1.f;
#pragma unroll
    for (int i = 0; i < KPL; ++i) gr.dtb[i] = 0.f;
    if (a.gate_mode != KDA2_GATE_PRECOMPUTED) {
      const float al = (a.flags & KDA2_HAS_A_LOG) ? load_param<P16>(a.A_log, hv, (a.flags & KDA2_A_LOG_BF16) != 0) : 0.f;
      gr.mul = a.gate_mode == KDA2_GATE_SOFTPLUS ? -__expf(al) : __expf(al);
      if (a.flags & KDA2_HAS_DT_BIAS) {
        const bool dt_bf16 = (a.flags & KDA2_DT_BIAS_BF16) != 0;
#pragma unroll
        for (int i = 0; i < KPL; ++i) gr.dtb[i] = load_param<P16>(a.dt_bias, (long)hv * K + lane + 32 * i, dt_bf16);
      }
    }
    return gr;
  }

  // A token's l2-norm reciprocals 1/|q|, 1/|k| (1 without l2) and q·k, from a warp's rows lane + 32 i, summed over
  // the warp (every lane ends with them).
  static __device__ __forceinline__ void qk_norms(const float (&q)[KPL], const float (&k)[KPL], bool l2, float& rq,
                                                  float& rk, float& sqk) {
    float sq = 0.f, sk = 0.f;
    sqk = 0.f;
#pragma unroll
    for (int i = 0; i < KPL; ++i) {
      sq = fmaf(q[i], q[i], sq);
      sk = fmaf(k[i], k[i], sk);
      sqk = fmaf(q[i], k[i], sqk);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      if (l2) {
        sq += __shfl_xor_sync(0xffffffffu, sq, off);
        sk += __shfl_xor_sync(0xffffffffu, sk, off);
      }
      sqk += __shfl_xor_sync(0xffffffffu, sqk, off);
    }
    rq = l2 ? rsqrtf(sq + 1e-6f) : 1.f;
    rk = l2 ? rsqrtf(sk + 1e-6f) : 1.f;
  }
  // The gate activation of one key channel in log2 units (≤ 0; the decay is ex2 of it), as the chunk kernels take it
  // (kda2/gate.cuh); precomputed gates are scaled. mul: −exp(A_log) (softplus) or exp(A_log) (lower bound), dtb: the
  // channel's dt_bias. On the SFU (ex2 / lg2) instead of log1pf and a precise division: at D3 (k_first) the softplus
  // was 11.6 % of the kernel's instructions (H200, ncu, bench/results/h200-2026-12-02-ring/call1).
  static __device__ __forceinline__ float gate_log2(const KDA2RecurrentArgs& a, int mode, float g, float mul, float dtb) {
    if (HAS_SOFTPLUS && mode == KDA2_GATE_SOFTPLUS) return mul * softplus_log2(g + dtb);
    if (HAS_LOWER_BOUND && mode == KDA2_GATE_LOWER_BOUND) return a.lower_bound * LOG2E * sigmoid_fast(mul * (g + dtb));
    return g * LOG2E;
  }

  // Slots 0 .. nt - 1 of the landed buffer into the table; the caller's barrier publishes it.
  static __device__ __forceinline__ void prepare_tokens(const KDA2RecurrentArgs& a, const GateRows& gr, int nt) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned char* s = preload_smem();
    float* tb = table_smem();
    const bool l2 = HAS_L2NORM && (a.flags & KDA2_QK_L2NORM);
    const bool bsig = HAS_BETA_SIGMOID && (a.flags & KDA2_BETA_SIGMOID);
    const bool g_bf16 = (a.flags & KDA2_G_BF16) != 0;
    const int mode = a.gate_mode;
    for (int u = warp; u < nt; u += WARPS) {
      float q[KPL], k[KPL], g[KPL];
#pragma unroll
      for (int i = 0; i < KPL; ++i) {  // rows lane + 32 i: consecutive lanes, consecutive elements
        q[i] = X::to_f(reinterpret_cast<const E*>(s)[u * K + lane + 32 * i]);
        k[i] = X::to_f(reinterpret_cast<const E*>(s + PL_K)[u * K + lane + 32 * i]);
        g[i] = g_bf16 ? X::to_f(reinterpret_cast<const E*>(s + PL_G)[u * K + lane + 32 * i])
                      : reinterpret_cast<const float*>(s + PL_G)[u * K + lane + 32 * i];
      }
      float rq, rk, sqk;
      qk_norms(q, k, l2, rq, rk, sqk);
#pragma unroll
      for (int i = 0; i < KPL; ++i) {
        const float gi = gate_log2(a, mode, g[i], gr.mul, gr.dtb[i]);
        float* row = tb + u * TROWS * TROW + row_at(lane + 32 * i);
        row[(TROWS - 1) * TROW] = ex2(gi);  // gi <= 0 on every gate path
        if constexpr (ALL_K) {
          row[0] = q[i] * rq;
          row[TROW] = k[i] * rk;
        }
      }
      if (lane == 0) {
        const float b = reinterpret_cast<const float*>(s + PL_B)[u];
        const float bmul = (a.flags & KDA2_NEG_EIGVAL) ? 2.f : 1.f;
        *reinterpret_cast<float4*>(tb + TB_SCAL + 4 * u) = make_float4(rq, rk, sqk * rq * rk, bsig ? bmul * sigmoid_fast(b) : b);
      }
    }
  }

  // The block of tokens t .. t + nt - 1 (nt <= PRELOAD) of this tile landed and prepared: for t = 0 the copies
  // preload_issue sent at CTA entry (b: thread t's beta), for a later block (a call longer than the bucket) copies
  // sent here once every warp is past the previous slots' reads (the barrier). Then beta stored, this thread's
  // copies landed and every thread's (the barrier), the table written and published (the barrier). One call site in
  // the token loop for both: with a second inlined copy for the refill the 4-CTA k_map = all kernels spilled.
  template <bool P16>
  static __device__ __forceinline__ void land_block(const KDA2RecurrentArgs& a, long t, long len, long bos, int hv,
                                                    int vb, float b) {
    const int nt = (int)(len - t < PRELOAD ? len - t : PRELOAD);
    if (t > 0) {
      __syncthreads();
      // Opaque copies (and the grid-tile column block read again): the address arithmetic stays in this rare
      // branch instead of being hoisted out of the token loop into registers held across it (a spill in the
      // 4-CTA k_map = all kernels).
      int H = a.H, HV = a.HV;
      if constexpr (!PERSISTENT) asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(vb));
      asm volatile("" : "+r"(H), "+r"(HV));
      b = preload_issue(a, bos + t, nt, hv / (HV / H), hv, vb * BV, H, HV);
    }
    const GateRows gr = gate_rows<P16>(a, hv, threadIdx.x & 31);
    if ((int)threadIdx.x < nt) reinterpret_cast<float*>(preload_smem() + PL_B)[threadIdx.x] = b;
    // A persistent kernel's entry block: the group committed after this one is the next tile's state
    // (prefetch_state), which may fly on; past the bucket it is waited for too (rare).
    if (PERSISTENT && t == 0) cp_async_wait<1>(); else cp_async_wait_all();
    __syncthreads();
    prepare_tokens(a, gr, nt);
    __syncthreads();
  }

  // body (PRELOAD > 0): token slot u's q and k rows key_row(lane, i) as copied, its decay rows, this warp's value
  // columns and the token's scalars (rq, rk, q̂·k̂, beta).
  static __device__ __forceinline__ float4 load_prepared(int u, int lane, int warp, TokenIn& in, float (&decay)[KPL]) {
    const unsigned char* s = preload_smem();
    const float* row = table_smem() + u * TROWS * TROW;
    load_rows_e(reinterpret_cast<const E*>(s) + u * K, lane, in.q);
    load_rows_e(reinterpret_cast<const E*>(s + PL_K) + u * K, lane, in.k);
    if constexpr (STRIDED) {
#pragma unroll
      for (int i = 0; i < KPL; ++i) decay[i] = row[lane + 32 * i];
    } else {
      load_f32<KPL, false>(row + lane * KPL, decay);
    }
    load_v(reinterpret_cast<const E*>(s + PL_V) + u * BV + warp * VPW, lane, in.v);
    return *reinterpret_cast<const float4*>(table_smem() + TB_SCAL + 4 * u);
  }

  // ---- k_map = all: lanes own value columns, each over a contiguous share of the K rows ----------------
  // KSPLIT = 32 / VPW lanes share a column, each holding RPL = K / KSPLIT rows. For K-first states every
  // state access is a row segment of VPW columns per lane group (coalesced), a CTA reads whole rows, and
  // no shared-memory transpose is needed; sums over K are in-lane plus log2(KSPLIT) shuffles. q, k and
  // the decay of the current token reach every lane through a per-warp shared-memory row.
  template <bool P16>
  static __device__ __forceinline__ void run_all_k(const KDA2RecurrentArgs& a, const TileAt& at, const TileAt& next) {
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int part = lane / CGROUPS;       // which share of the K rows
    const int hv = at.hv;
    const int n = at.n;
    const int col = at.vb * BV + warp * VPW + (lane % CGROUPS) * CW;  // first of this lane's CW columns
    const int h = q_head(a, hv);
    long bos, len;
    if (HAS_VARLEN && a.cu_seqlens != nullptr) {
      bos = a.cu_seqlens[n];
      len = a.cu_seqlens[n + 1] - bos;
    } else {
      bos = (long)n * a.T;
      len = a.T;
    }
    const int srow = PERSISTENT ? at.srow : a.state_indices != nullptr ? a.state_indices[n] : n;
    E* o = reinterpret_cast<E*>(a.o);
    if (srow < 0) {  // padding slot: zero outputs, no state touched
      prefetch_state(a, next);
      float z[CW];
#pragma unroll
      for (int c = 0; c < CW; ++c) z[c] = 0.f;
      if (part == 0)
        for (long t = 0; t < len; ++t) store_e16<E, CW>(o + ((bos + t) * a.HV + hv) * (long)V + col, z);
      return;
    }
    const long state_off = ((long)srow * a.HV + hv) * (long)K * V + (long)part * RPL * V + col;
    // Preload: the first PRELOAD tokens' inputs in flight before the state loads are issued (landed below).
    const int v_cta = col - warp * VPW - (lane % CGROUPS) * CW;
    float pre_b = 0.f;
    if constexpr (PRELOAD > 0) {
      if constexpr (PERSISTENT) __syncthreads();  // every warp is past the previous tile's reads of the buffer
      pre_b = preload_issue(a, bos, (int)(len < PRELOAD ? len : PRELOAD), h, hv, v_cta, a.H, a.HV);
    }
    float S[RPL][CW];
    if constexpr (PERSISTENT) {  // copied while the previous tile ran; the buffer is free again once read
      if constexpr (PRELOAD > 0) cp_async_wait<1>();  // the state's group; this tile's preload group may fly on
      else cp_async_wait_all();
      if (a.h0 != nullptr) {
#pragma unroll
        for (int r = 0; r < RPL; ++r) read_run(r, S[r]);
      } else {
#pragma unroll
        for (int r = 0; r < RPL; ++r)
#pragma unroll
          for (int c = 0; c < CW; ++c) S[r][c] = 0.f;
      }
      __syncwarp();  // orders the reads above before the next tile's copies into the same places
      prefetch_state(a, next);
    } else if (a.h0 != nullptr) {
      if constexpr (BULK) {
        bulk_issue(a, srow, hv, at.vb);  // landed by `land` below
      } else {
#pragma unroll
        for (int r = 0; r < RPL; ++r) ld_state<SE, CW>(reinterpret_cast<const SE*>(a.h0) + state_off + (long)r * V, S[r]);
      }
    } else {
#pragma unroll
      for (int r = 0; r < RPL; ++r)
#pragma unroll
        for (int c = 0; c < CW; ++c) S[r][c] = 0.f;
    }
    // Bulk staging: the state lands where it is first needed (the first token's step, or the store of a call
    // without tokens), once its inputs are in flight too. Uniform over the CTA (len, h0 are).
    const auto land = [&]() {
      if constexpr (BULK) {
        if (a.h0 != nullptr) {
          bulk_wait();
#pragma unroll
          for (int r = 0; r < RPL; ++r) tile_ld<CW>(bulk_smem() + (part * RPL + r) * BK_PITCH + (col - v_cta), S[r]);
        }
      }
    };
    // One token on the state: decay, k^T S and q^T S over this lane's rows (q̂, k̂ and the decay as rows of RPL
    // floats, one address per lane group: a broadcast), the shares of K combined, then v', o and the update.
    const auto step = [&](long tok, const float* my_q, const float* my_k, const float* my_d, const float (&v_in)[CW],
                          float b_in, bool activate, float qk) {
      float acc_k[CW], acc_q[CW];
#pragma unroll
      for (int c = 0; c < CW; ++c) acc_k[c] = acc_q[c] = 0.f;
#pragma unroll
      for (int r = 0; r < RPL; r += 4) {  // 16-byte reads
        const float4 qq = *reinterpret_cast<const float4*>(my_q + r);
        const float4 kk = *reinterpret_cast<const float4*>(my_k + r);
        const float4 dd = *reinterpret_cast<const float4*>(my_d + r);
        const float qv[4] = {qq.x, qq.y, qq.z, qq.w}, kv[4] = {kk.x, kk.y, kk.z, kk.w}, dv[4] = {dd.x, dd.y, dd.z, dd.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
          for (int c = 0; c < CW; ++c) {
            S[r + e][c] *= dv[e];
            acc_k[c] = fmaf(kv[e], S[r + e][c], acc_k[c]);
            acc_q[c] = fmaf(qv[e], S[r + e][c], acc_q[c]);
          }
      }
#pragma unroll
      for (int off = CGROUPS; off < 32; off <<= 1)  // combine the KSPLIT shares of each column
#pragma unroll
        for (int c = 0; c < CW; ++c) {
          acc_k[c] += __shfl_xor_sync(0xffffffffu, acc_k[c], off);
          acc_q[c] += __shfl_xor_sync(0xffffffffu, acc_q[c], off);
        }
      const float beta = activate ? ((a.flags & KDA2_NEG_EIGVAL) ? 2.f : 1.f) * sigmoid_fast(b_in) : b_in;
      float vn[CW], out[CW];
#pragma unroll
      for (int c = 0; c < CW; ++c) {
        vn[c] = beta * (v_in[c] - acc_k[c]);
        out[c] = a.scale * (acc_q[c] + qk * vn[c]);
      }
      if (part == 0) store_e16<E, CW>(o + (tok * a.HV + hv) * (long)V + col, out);
#pragma unroll
      for (int r = 0; r < RPL; r += 4) {
        const float4 kk = *reinterpret_cast<const float4*>(my_k + r);
        const float kv[4] = {kk.x, kk.y, kk.z, kk.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
          for (int c = 0; c < CW; ++c) S[r + e][c] = fmaf(kv[e], vn[c], S[r + e][c]);
      }
      if (INTERMEDIATE && a.intermediate != nullptr) {  // the state after this token (speculative-decode rollback)
        SE* p = reinterpret_cast<SE*>(a.intermediate) + (tok * a.HV + hv) * (long)K * V + (long)part * RPL * V + col;
#pragma unroll
        for (int r = 0; r < RPL; ++r) st_state<SE, CW>(p + (long)r * V, S[r]);
      }
    };
    if constexpr (PRELOAD > 0) {  // the prepared table: the chain reads shared memory only
      const float* tb = table_smem();
      const unsigned char* buf = preload_smem();
      int u = 0;
      for (long t = 0; t < len; ++t, ++u) {
        if (t == 0 || u == PRELOAD) {  // the entry block, or past the buffer (a call longer than the bucket)
          land_block<P16>(a, t, len, bos, hv, at.vb, pre_b);
          u = 0;
        }
        if (t == 0) land();
        float v_in[CW];
        load_e16<E, CW>(reinterpret_cast<const E*>(buf + PL_V) + u * BV + (col - v_cta), v_in);
        const float4 sc = *reinterpret_cast<const float4*>(tb + TB_SCAL + 4 * u);  // rq, rk, q̂·k̂, beta
        const float* row = tb + u * 3 * TROW + part * STAGE_ROW;
        step(bos + t, row, row + TROW, row + 2 * TROW, v_in, sc.w, false, sc.z);
      }
    } else {
      float (&stage)[WARPS][3][KSPLIT * STAGE_ROW] = stage_smem();  // q*rq, k*rk, decay of the token
      const int mode = a.gate_mode;
      float gate_mul = 1.f, dtb[KPL];
#pragma unroll
      for (int i = 0; i < KPL; ++i) dtb[i] = 0.f;
      if (mode != KDA2_GATE_PRECOMPUTED) {
        const float al = (a.flags & KDA2_HAS_A_LOG) ? load_param<P16>(a.A_log, hv, (a.flags & KDA2_A_LOG_BF16) != 0) : 0.f;
        gate_mul = mode == KDA2_GATE_SOFTPLUS ? -__expf(al) : __expf(al);
        if (a.flags & KDA2_HAS_DT_BIAS) {
          const bool dt_bf16 = (a.flags & KDA2_DT_BIAS_BF16) != 0;
#pragma unroll
          for (int i = 0; i < KPL; ++i) dtb[i] = load_param<P16>(a.dt_bias, (long)hv * K + lane + 32 * i, dt_bf16);
        }
      }
      const bool l2 = HAS_L2NORM && (a.flags & KDA2_QK_L2NORM);
      const bool bsig = HAS_BETA_SIGMOID && (a.flags & KDA2_BETA_SIGMOID);
      const bool g_bf16 = (a.flags & KDA2_G_BF16) != 0, b_bf16 = (a.flags & KDA2_BETA_BF16) != 0;
      const float* my_q = &stage[warp][0][part * STAGE_ROW];
      const float* my_k = &stage[warp][1][part * STAGE_ROW];
      const float* my_d = &stage[warp][2][part * STAGE_ROW];
      for (long t = 0; t < len; ++t) {
        const long tok = bos + t;
        float q[KPL], k[KPL], g[KPL];  // rows lane + 32 i: coalesced loads, stored to the stage below
        float v_in[CW];
        load_rows_e(reinterpret_cast<const E*>(a.q) + (tok * a.H + h) * (long)K, lane, q);
        load_rows_e(reinterpret_cast<const E*>(a.k) + (tok * a.H + h) * (long)K, lane, k);
        load_rows_gate(a.g, (tok * a.HV + hv) * (long)K, g_bf16, lane, g);
        load_e16<E, CW>(reinterpret_cast<const E*>(a.v) + (tok * a.HV + hv) * (long)V + col, v_in);
        const long bi = tok * a.HV + hv;
        const float b_in = b_bf16 ? X::to_f(reinterpret_cast<const E*>(a.beta)[bi]) : reinterpret_cast<const float*>(a.beta)[bi];
        if (t == 0) land();
        float rq, rk, sqk;
        qk_norms(q, k, l2, rq, rk, sqk);
        const float qk = sqk * rq * rk;
        __syncwarp();  // the previous token's readers are done with this warp's stage
#pragma unroll
        for (int i = 0; i < KPL; ++i) {
          const float gi = gate_log2(a, mode, g[i], gate_mul, dtb[i]);
          const int at = row_at(lane + 32 * i);
          stage[warp][0][at] = q[i] * rq;
          stage[warp][1][at] = k[i] * rk;
          stage[warp][2][at] = ex2(gi);  // gi <= 0 on every gate path
        }
        __syncwarp();
        step(tok, my_q, my_k, my_d, v_in, b_in, bsig, qk);
      }
    }
    if (len <= 0) land();
    if (a.ht == nullptr) return;
    if constexpr (BULK) {
#pragma unroll
      for (int r = 0; r < RPL; ++r) tile_st<CW>(bulk_smem() + (part * RPL + r) * BK_PITCH + (col - v_cta), S[r]);
      bulk_out(a, srow, hv, at.vb);
    } else {
#pragma unroll
      for (int r = 0; r < RPL; ++r) st_state<SE, CW>(reinterpret_cast<SE*>(a.ht) + state_off + (long)r * V, S[r]);
    }
  }

  // The register state of this lane (key rows key_row(lane, i), value columns v0 .. v0+VPW-1) to the
  // state at `base` ([K, V], or [V, K] with V_FIRST) with direct stores: the final state of unstaged
  // variants, and every per-token intermediate state.
  static __device__ __forceinline__ void store_state_regs(SE* __restrict__ base, int lane, int v0, const float (&S)[KPL][VPW]) {
    if constexpr (V_FIRST) {
#pragma unroll
      for (int j = 0; j < VPW; ++j) {
        if constexpr (STRIDED) {
#pragma unroll
          for (int i = 0; i < KPL; ++i) st_state1(base + (long)(v0 + j) * K + key_row(lane, i), S[i][j]);
        } else {
          float col[KPL];
#pragma unroll
          for (int i = 0; i < KPL; ++i) col[i] = S[i][j];
          st_state<SE, KPL>(base + (long)(v0 + j) * K + lane * KPL, col);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < KPL; ++i) st_state<SE, VPW>(base + (long)key_row(lane, i) * V + v0, S[i]);
    }
  }

  // A CTA of WARPS * 32 threads: one tile of the grid (V / BV, HV, N), or a loop over tiles (PERSISTENT; see
  // tiles). Called from the variant's extern "C" entry and force-inlined there, so the entry is the whole kernel
  // (no device-function call).
  // Shared memory is declared here, once per kernel, not in the bodies: each body<P16> would get its own copy.
  static __device__ __forceinline__ float (&stage_smem())[WARPS][3][KSPLIT * STAGE_ROW] {
    __shared__ __align__(16) float stage[WARPS][3][KSPLIT * STAGE_ROW];
    return stage;
  }
  static __device__ __forceinline__ float (&tile_smem())[SMEM_STAGING ? K * SMEM_STRIDE : 4] {
    __shared__ __align__(16) float tile[SMEM_STAGING ? K * SMEM_STRIDE : 4];
    return tile;
  }
  static __device__ __forceinline__ unsigned char (&preload_smem())[PRELOAD ? PL_BYTES : 16] {
    __shared__ __align__(16) unsigned char buf[PRELOAD ? PL_BYTES : 16];
    return buf;
  }

  // The persistent kernels' copy buffer (state elements; the TIR plan sizes it for fp32).
  static __device__ __forceinline__ SE (&prefetch_smem())[PF_ELEMS] {
    __shared__ __align__(16) SE buf[PF_ELEMS];
    return buf;
  }

  // The bulk tile lives in dynamic shared memory (the library launches a bulk kernel with its bytes, opting in past
  // 48 KB, the most static __shared__ arrays may take): the planner sizes the rest against that limit and the tile
  // against the GPU's per-block shared memory (plan/model.py smem_budget).
  static __device__ __forceinline__ SE* bulk_smem() {
    extern __shared__ __align__(128) unsigned char kda2_bulk_dyn[];
    return reinterpret_cast<SE*>(kda2_bulk_dyn);
  }
  static __device__ __forceinline__ uint64_t& bulk_bar() {
    __shared__ __align__(8) uint64_t bar;
    return bar;
  }
  // The k_first bulk kernels' tensor maps (the kernel parameter's address, set by thread 0 in run: only thread 0
  // issues tensor copies).
  static __device__ __forceinline__ const StateMaps*& state_maps() {
    __shared__ const StateMaps* maps;
    return maps;
  }

  // The state tile of (pool row srow, head hv, V-block vb): its first element in the state (v_first: BV rows of K,
  // contiguous; k_first: K rows of BV, V apart).
  static __device__ __forceinline__ long tile_base(const KDA2RecurrentArgs& a, int srow, int hv, int vb) {
    return ((long)srow * a.HV + hv) * (long)K * V + (V_FIRST ? (long)vb * BV * K : (long)vb * BV);
  }
  // Every thread (a uniform point of the CTA): the tile of (pool row srow, head hv, V-block vb) of h0 into bulk_smem().
  // Thread 0 initialises the mbarrier, and after a barrier (every thread sees it initialised before any touches it)
  // arms it and issues the copy; nothing waits for it here. The kernels issue first and land the tile (bulk_wait)
  // where the state is first needed, after the token's input loads are issued: landing at once serialised the two
  // round trips (kda2 tune, H200: 105 vs 74 us at N = 64 v_first). One phase per CTA: parity 0.
  static __device__ __forceinline__ void bulk_issue(const KDA2RecurrentArgs& a, int srow, int hv, int vb) {
    const uint32_t bar = smem_u32(&bulk_bar());
    if (threadIdx.x == 0) {
      mbar_init(bar, 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the copy engine
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      mbar_expect_tx(bar, BK_BYTES);
      if constexpr (TMAP)  // the state index srow * HV + hv < 2^31: the pool's bytes bound it far below
        tensor_load_3d(smem_u32(bulk_smem()), &state_maps()->in, vb * BV, 0, srow * a.HV + hv, bar);
      else
        bulk_copy(smem_u32(bulk_smem()), reinterpret_cast<const SE*>(a.h0) + tile_base(a, srow, hv, vb), BK_BYTES, bar);
    }
  }
  // Bulk kernels at the compiler's occupancy (MIN_CTAS 1), one thread at entry (before griddepcontrol.wait, as
  // prefetch_tile_l2): L2 is asked for the state tile of linear CTA b + SMs, so that CTA's bulk copy finds its lines
  // there. One bulk prefetch instruction (a tensor-map one for k_first), nothing live across the body; a hint: a tile
  // outside the grid or a negative pool row is skipped, and a pool row read before the wait may be stale (lines no one
  // reads). Measured on the H200 (experiments/2026-12-04-lead, same run, two rounds): D3's routes v_first 272.1 ->
  // 263.5 us, k_first 269.8 -> 264.3; a lead of SMs / 2 the same, 2 x SMs slower than none (278 us). In the kernels
  // raised to 4 CTAs per SM it lost at every lead and form tried (M1 79.7 -> 82-103 us, D2 k_first 73.2 -> 73.7-92.3;
  // per-line prefetch.global.L2 as well), so they have none (docs/DESIGN.md §2.2, recurrent bulk staging).
  static constexpr bool L2_LEAD = BULK && Cfg::MIN_CTAS == 1;
  static __device__ __forceinline__ void bulk_prefetch_ahead(const KDA2RecurrentArgs& a, const StateMaps* maps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (a.h0 == nullptr || threadIdx.x != 32 * (WARPS - 1)) return;
    unsigned nsm;
    asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
    // the grid (V / BV, HV, N) in the persistent kernels' tile order (tile_at, pool_row)
    const long t = linear_cta() + nsm;
    const int srow = pool_row(a, t, tile_count(a));
    if (srow < 0) return;
    const TileAt at = tile_at(a, t, srow);
    if constexpr (TMAP)
      asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n"
                   ::"l"(&maps->in), "r"(at.vb * BV), "r"(0), "r"(srow * a.HV + at.hv) : "memory");
    else
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n"
                   ::"l"(reinterpret_cast<const SE*>(a.h0) + tile_base(a, srow, at.hv, at.vb)), "r"(BK_BYTES) : "memory");
#endif
  }
  // Every thread: the issued tile has landed and is visible on return.
  static __device__ __forceinline__ void bulk_wait() { mbar_wait(smem_u32(&bulk_bar()), 0); }
  // Every thread, after writing its share back into bulk_smem(): the tile to ht. The issuing thread waits until the
  // copy has read shared memory (the CTA may exit then); the writes complete before the grid does.
  static __device__ __forceinline__ void bulk_out(const KDA2RecurrentArgs& a, int srow, int hv, int vb) {
    fence_proxy_async();  // this thread's shared stores, before the copy engine reads them
    __syncthreads();
    if (threadIdx.x == 0) {
      if constexpr (TMAP)
        tensor_store_3d(&state_maps()->out, vb * BV, 0, srow * a.HV + hv, smem_u32(bulk_smem()));
      else
        bulk_store(reinterpret_cast<SE*>(a.ht) + tile_base(a, srow, hv, vb), smem_u32(bulk_smem()), BK_BYTES);
      bulk_commit();
      bulk_wait_read<0>();
    }
  }
  // N contiguous state elements of the bulk tile at p, widened to fp32 / rounded back (pieces as aligned as N allows).
  template <int N>
  static __device__ __forceinline__ void tile_ld(const SE* p, float (&out)[N]) {
    if constexpr (sizeof(SE) == 4) {
      load_f32<N, false>(reinterpret_cast<const float*>(p), out);
    } else {
      constexpr int P = N % 4 == 0 ? 4 : N % 2 == 0 ? 2 : 1;
#pragma unroll
      for (int c = 0; c < N; c += P) {
        float x[P];
        ld_state_smem<SE, P>(p + c, x);
#pragma unroll
        for (int e = 0; e < P; ++e) out[c + e] = x[e];
      }
    }
  }
  template <int N>
  static __device__ __forceinline__ void tile_st(SE* p, const float (&in)[N]) {
    if constexpr (sizeof(SE) == 4) {
      store_f32<N, false>(reinterpret_cast<float*>(p), in);
    } else if constexpr (N % 2 == 0) {
#pragma unroll
      for (int c = 0; c < N; c += 2)
        *reinterpret_cast<unsigned int*>(p + c) = Elem16<__nv_bfloat16>::pack(in[c], in[c + 1]);
    } else {
#pragma unroll
      for (int c = 0; c < N; ++c) p[c] = __float2bfloat16_rn(in[c]);
    }
  }

  // sm_90, before griddepcontrol.wait: warp 0 asks L2 for the lines of its state tile, so that under a programmatic
  // launch the tile's DRAM latency overlaps the previous kernel's tail instead of following it. Only an address
  // hint: the pool row is read before the previous kernel's writes are ordered (a stale row prefetches lines no one
  // reads), and L2 is where every write lands, so no load after the wait sees a stale line. Compiled into the
  // one-token kernels only (one tile per CTA, no preload, no per-token states): in a multi-token kernel its code
  // took registers (c361e1aa103f 164 -> 198, two CTAs per SM instead of three: M1 k_first 92.3 -> 111.6 us, H200,
  // same run, bench/results/h200-2026-12-02-decode/call1). Run only by grids of at most two CTAs per SM (one-sequence
  // decode; a D2 grid has thousands): on every CTA of D2 it cost 3-4 % (h200-2026-12-01-decode/call9). As built,
  // same run (h200-2026-12-02-decode/call5): D1 under graph replay v_first 3.83 -> 3.22 us, k_first (with the
  // 8-column tile the tuner now routes there) 4.25 -> 3.62 us; D2, D3 within 1 %.
  static constexpr bool L2_PREFETCH = !PERSISTENT && !INTERMEDIATE && PRELOAD == 0 && !PREFETCH;
  static __device__ __forceinline__ void prefetch_tile_l2(const KDA2RecurrentArgs& a) {
    if constexpr (L2_PREFETCH) {
      unsigned nsm;
      asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
      if (gridDim.x * gridDim.y * gridDim.z > 2 * nsm) return;
      if (threadIdx.x >= 32 || a.h0 == nullptr || (int)blockIdx.z >= a.N) return;
      const int n = blockIdx.z;
      const int srow = a.state_indices != nullptr ? a.state_indices[n] : n;
      if (srow < 0) return;
      constexpr int ROWS = V_FIRST ? BV : K;
      constexpr long ROW_B = (V_FIRST ? K : BV) * (long)sizeof(SE), GROW_B = (V_FIRST ? K : V) * (long)sizeof(SE);
      constexpr int LPR = (int)((ROW_B + 127) / 128);  // 128-byte lines per row
      const char* base = reinterpret_cast<const char*>(a.h0) + tile_base(a, srow, blockIdx.y, blockIdx.x) * (long)sizeof(SE);
      for (int l = threadIdx.x; l < ROWS * LPR; l += 32)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(base + (l / LPR) * GROW_B + (l % LPR) * 128));
    }
  }

  // The entry: one uniform branch picks the body compiled for the call's gate-parameter dtypes (load_param).
  // sm_90+: the library launches these kernels as programmatic dependents of the stream's previous kernel
  // (library.cpp.j2 launch_recurrent): griddepcontrol.wait before any global access but the L2 prefetch above (the
  // previous kernel's writes — this step's inputs, the state pool — are then visible; without a PDL launch it
  // returns at once), and launch_dependents right away: a dependent grid starts only once every CTA of this one is
  // resident and has signalled, and waits for this grid's completion before it reads, so it takes no slot a CTA
  // of ours needs.
  static __device__ __forceinline__ void run(const KDA2RecurrentArgs& a, const StateMaps* maps = nullptr) {
    if constexpr (TMAP) {
      if (threadIdx.x == 0) state_maps() = maps;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    prefetch_tile_l2(a);
    if constexpr (L2_LEAD) bulk_prefetch_ahead(a, maps);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    if (a.flags & (KDA2_A_LOG_BF16 | KDA2_DT_BIAS_BF16)) tiles<true>(a); else tiles<false>(a);
  }

  template <bool P16>
  static __device__ __forceinline__ void run_tile(const KDA2RecurrentArgs& a, const TileAt& at, const TileAt& next) {
    if constexpr (ALL_K) run_all_k<P16>(a, at, next); else body<P16>(a, at, next);
  }

  // Grid (V / BV, HV, N): one tile per CTA. Persistent: any grid, linear CTA b of G takes tiles b, b + G, b + 2G,
  // ... of the (V-block, head, sequence) order (V-block fastest, as the grid's x): the CTAs in flight stream one
  // window of the state, and each CTA has its next tile's state copies in flight while it computes and stores
  // the current one (the body calls prefetch_state(next) once it holds the current state in registers). The
  // pool row of the tile after next is read a whole tile ahead, so no copy waits on state_indices.
  template <bool P16>
  static __device__ __forceinline__ void tiles(const KDA2RecurrentArgs& a) {
    if constexpr (!PERSISTENT) {  // the body reads the pool row after the sequence bounds (the tuned order)
      run_tile<P16>(a, TileAt{(int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, 0}, TileAt{0, 0, -1, -1});
    } else {
      const long total = tile_count(a);
      const long stride = (long)gridDim.x * gridDim.y * gridDim.z;
      long t = linear_cta();
      if (t >= total) return;
      int row = pool_row(a, t, total), row_next = pool_row(a, t + stride, total);
      prefetch_state(a, tile_at(a, t, row));
      for (;;) {
        const int row_after = pool_row(a, t + 2 * stride, total);
        run_tile<P16>(a, tile_at(a, t, row), tile_at(a, t + stride, row_next));
        t += stride;
        if (t >= total) break;
        row = row_next;
        row_next = row_after;
      }
    }
  }

  // This CTA's place in the grid's linear order (x fastest), and the tiles of a call: the (V-block, head, sequence)
  // order tile_at decodes.
  static __device__ __forceinline__ long linear_cta() {
    return blockIdx.x + (long)gridDim.x * (blockIdx.y + (long)gridDim.y * blockIdx.z);
  }
  static __device__ __forceinline__ long tile_count(const KDA2RecurrentArgs& a) { return (long)(V / BV) * a.HV * a.N; }
  // Tile t of the persistent order, its pool row already read.
  static __device__ __forceinline__ TileAt tile_at(const KDA2RecurrentArgs& a, long t, int srow) {
    constexpr int NVB = V / BV;
    const long head = t / NVB;  // (sequence, head) index
    const long n = head / a.HV;
    return TileAt{(int)(t - head * NVB), (int)(head - n * a.HV), (int)n, srow};
  }

  // The state row of tile t's sequence; -1 past the last tile.
  static __device__ __forceinline__ int pool_row(const KDA2RecurrentArgs& a, long t, long total) {
    if (t >= total) return -1;
    const int n = (int)(t / ((long)(V / BV) * a.HV));
    return a.state_indices != nullptr ? a.state_indices[n] : n;
  }

  // Element offset in the state of run 0 of this thread's share of tile `at`, and of run m from run 0 (a constant):
  // the same elements the direct loads of run_all_k and body read into registers.
  static __device__ __forceinline__ long run_base(const KDA2RecurrentArgs& a, const TileAt& at) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long base = ((long)at.srow * a.HV + at.hv) * (long)K * V;
    const int v0 = at.vb * BV + warp * VPW;
    if constexpr (ALL_K) return base + (long)((lane / CGROUPS) * RPL) * V + v0 + (lane % CGROUPS) * CW;
    else if constexpr (V_FIRST) return base + (long)v0 * K + key_row(lane, 0);
    else return base + (long)key_row(lane, 0) * V + v0;
  }
  static __host__ __device__ constexpr long run_step(int m) {
    return ALL_K ? (long)m * V
         : V_FIRST ? (STRIDED ? (long)(m / KPL) * K + (key_row_step(m % KPL)) : (long)m * K)
         : (long)key_row_step(m) * V;
  }
  // key_row(lane, i) - key_row(lane, 0)
  static __host__ __device__ constexpr int key_row_step(int i) { return STRIDED ? 32 * i : i; }

  // Persistent: start copying tile `at`'s state (this thread's share) into the copy buffer. Nothing for a padding
  // slot, past the last tile, or without h0 (the body starts from zeros then).
  static __device__ __forceinline__ void prefetch_state(const KDA2RecurrentArgs& a, const TileAt& at) {
    if constexpr (PERSISTENT) {
      if (at.srow >= 0 && a.h0 != nullptr)
        copy_pieces<0>(prefetch_smem() + threadIdx.x * PF_VEC, reinterpret_cast<const SE*>(a.h0) + run_base(a, at));
      cp_async_commit();  // one group per tile, empty or not: the waits count groups (land_block)
    }
  }
  // Piece M (run M / PF_PIECES, piece M % PF_PIECES) and the ones after it; a recursion so each offset is a constant.
  template <int M>
  static __device__ __forceinline__ void copy_pieces(SE* dst, const SE* src) {
    if constexpr (M < PF_RUNS * PF_PIECES) {
      constexpr long off = (run_step(M / PF_PIECES) + (M % PF_PIECES) * PF_VEC) * (long)sizeof(SE);
      cp_async<PF_VEC * (int)sizeof(SE), off>(dst + M * PF_ROW, src);
      copy_pieces<M + 1>(dst, src);
    }
  }

  // Persistent: run m of this thread's share of the current tile, from the copy buffer (after
  // cp_async_wait_all).
  static __device__ __forceinline__ void read_run(int m, float (&out)[PF_RUN]) {
    const SE* buf = prefetch_smem();
#pragma unroll
    for (int p = 0; p < PF_PIECES; ++p) {
      float piece[PF_VEC];
      ld_state_smem<SE, PF_VEC>(buf + (m * PF_PIECES + p) * PF_ROW + threadIdx.x * PF_VEC, piece);
#pragma unroll
      for (int e = 0; e < PF_VEC; ++e) out[p * PF_VEC + e] = piece[e];
    }
  }

  // body: this lane's state registers (key rows key_row(lane, i), value columns v0 + j) from (LOAD) or to the bulk
  // tile — the elements its direct loads and stores would move.
  template <bool LOAD>
  static __device__ __forceinline__ void bulk_tile_regs(int lane, int warp, float (&S)[KPL][VPW]) {
    SE* tile = bulk_smem();
    if constexpr (V_FIRST) {
#pragma unroll
      for (int j = 0; j < VPW; ++j) {
        SE* row = tile + (warp * VPW + j) * BK_PITCH;
        if constexpr (STRIDED) {
#pragma unroll
          for (int i = 0; i < KPL; ++i) {
            if constexpr (LOAD) S[i][j] = ld_state1(row + key_row(lane, i)); else st_state1(row + key_row(lane, i), S[i][j]);
          }
        } else {
          float col[KPL];
          if constexpr (!LOAD) {
#pragma unroll
            for (int i = 0; i < KPL; ++i) col[i] = S[i][j];
            tile_st<KPL>(row + lane * KPL, col);
          } else {
            tile_ld<KPL>(row + lane * KPL, col);
#pragma unroll
            for (int i = 0; i < KPL; ++i) S[i][j] = col[i];
          }
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < KPL; ++i) {
        SE* p = tile + key_row(lane, i) * BK_PITCH + warp * VPW;
        if constexpr (LOAD) tile_ld<VPW>(p, S[i]); else tile_st<VPW>(p, S[i]);
      }
    }
  }

  template <bool P16>
  static __device__ __forceinline__ void body(const KDA2RecurrentArgs& a, const TileAt& at, const TileAt& next) {
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int hv = at.hv;
    const int n = at.n;
    const int v_cta = at.vb * BV;
    const int v0 = v_cta + warp * VPW;
    const int h = q_head(a, hv);

    long bos, len;
    if (HAS_VARLEN && a.cu_seqlens != nullptr) {
      bos = a.cu_seqlens[n];
      len = a.cu_seqlens[n + 1] - bos;
    } else {
      bos = (long)n * a.T;
      len = a.T;
    }
    const int srow = PERSISTENT ? at.srow : a.state_indices != nullptr ? a.state_indices[n] : n;

    if (srow < 0) {  // padding slot (serving convention): outputs are zero, no state is touched
      prefetch_state(a, next);
      float z[VPW];
#pragma unroll
      for (int j = 0; j < VPW; ++j) z[j] = 0.f;
      if (lane == 0)
        for (long t = 0; t < len; ++t)
          store_e16<E, VPW>(reinterpret_cast<E*>(a.o) + ((bos + t) * a.HV + hv) * (long)V + v0, z);
      return;
    }

    const long state_off = ((long)srow * a.HV + hv) * (long)K * V;
    // Preload: the first PRELOAD tokens' inputs in flight before the state loads are issued (landed below).
    float pre_b = 0.f;
    if constexpr (PRELOAD > 0) {
      if constexpr (PERSISTENT) __syncthreads();  // every warp is past the previous tile's reads of the buffer
      pre_b = preload_issue(a, bos, (int)(len < PRELOAD ? len : PRELOAD), h, hv, v_cta, a.H, a.HV);
    }
    float S[KPL][VPW];
    // One tile serves both directions: each warp writes back exactly the region it read.
    float (&tile)[SMEM_STAGING ? K * SMEM_STRIDE : 4] = tile_smem();

    // ---- state in ----------------------------------------------------------------------------
    if constexpr (PERSISTENT) {  // copied while the previous tile ran; the buffer is free again once read
      if constexpr (PRELOAD > 0) cp_async_wait<1>();  // the state's group; this tile's preload group may fly on
      else cp_async_wait_all();
      if (a.h0 != nullptr) {
#pragma unroll
        for (int m = 0; m < PF_RUNS; ++m) {
          float run[PF_RUN];
          read_run(m, run);
#pragma unroll
          for (int e = 0; e < PF_RUN; ++e) {
            if constexpr (V_FIRST && STRIDED) S[m % KPL][m / KPL] = run[e];  // run m: row m % KPL of column m / KPL
            else if constexpr (V_FIRST) S[e][m] = run[e];                    // column m, rows lane * KPL + e
            else S[m][e] = run[e];                                           // row key_row(lane, m), columns v0 + e
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < KPL; ++i)
#pragma unroll
          for (int j = 0; j < VPW; ++j) S[i][j] = 0.f;
      }
      __syncwarp();  // orders the reads above before the next tile's copies into the same places
      prefetch_state(a, next);
    } else if constexpr (BULK) {
      // landed before the token loop, once the first token's inputs are in flight (zeros without h0)
      if (a.h0 != nullptr) bulk_issue(a, srow, hv, at.vb);
#pragma unroll
      for (int i = 0; i < KPL; ++i)
#pragma unroll
        for (int j = 0; j < VPW; ++j) S[i][j] = 0.f;
    } else if constexpr (SMEM_STAGING) {
      if (a.h0 != nullptr) {
        // Coalesced: consecutive threads take consecutive float4 of a tile row (BV floats wide). All
        // loads are issued before the first shared store so FILL_ITERS requests are in flight at once.
        float4 buf[FILL_ITERS];
#pragma unroll
        for (int it = 0; it < FILL_ITERS; ++it) {
          const int f = it * WARPS * 32 + threadIdx.x;
          if (f < FILL_TOTAL)
            buf[it] = ld_state4(reinterpret_cast<const SE*>(a.h0) + state_off + (long)(f / (BV / 4)) * V + v_cta + (f % (BV / 4)) * 4);
        }
#pragma unroll
        for (int it = 0; it < FILL_ITERS; ++it) {
          const int f = it * WARPS * 32 + threadIdx.x;
          if (f < FILL_TOTAL) *reinterpret_cast<float4*>(&tile[(f / (BV / 4)) * SMEM_STRIDE + (f % (BV / 4)) * 4]) = buf[it];
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < KPL; ++i) load_f32<VPW, false>(&tile[key_row(lane, i) * SMEM_STRIDE + warp * VPW], S[i]);
      } else {
#pragma unroll
        for (int i = 0; i < KPL; ++i)
#pragma unroll
          for (int j = 0; j < VPW; ++j) S[i][j] = 0.f;
      }
    } else {
      if (a.h0 != nullptr) {
        if constexpr (V_FIRST) {
          if constexpr (STRIDED) {
#pragma unroll
            for (int j = 0; j < VPW; ++j)
#pragma unroll
              for (int i = 0; i < KPL; ++i) S[i][j] = ld_state1(reinterpret_cast<const SE*>(a.h0) + state_off + (long)(v0 + j) * K + key_row(lane, i));
          } else {
#pragma unroll
            for (int j = 0; j < VPW; ++j) {
              float col[KPL];
              ld_state<SE, KPL>(reinterpret_cast<const SE*>(a.h0) + state_off + (long)(v0 + j) * K + lane * KPL, col);
#pragma unroll
              for (int i = 0; i < KPL; ++i) S[i][j] = col[i];
            }
          }
        } else {
#pragma unroll
          for (int i = 0; i < KPL; ++i) ld_state<SE, VPW>(reinterpret_cast<const SE*>(a.h0) + state_off + (long)key_row(lane, i) * V + v0, S[i]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < KPL; ++i)
#pragma unroll
          for (int j = 0; j < VPW; ++j) S[i][j] = 0.f;
      }
    }

    // ---- per-head gate constants (per-token kernels; a preload kernel's prepare_tokens applies them) -----------
    const int mode = a.gate_mode;
    float gate_mul = 1.f;  // softplus: -exp(A_log); lower_bound: exp(A_log)
    float dtb[KPL];
#pragma unroll
    for (int i = 0; i < KPL; ++i) dtb[i] = 0.f;
    if (PRELOAD == 0 && mode != KDA2_GATE_PRECOMPUTED) {
      const float al = (a.flags & KDA2_HAS_A_LOG) ? load_param<P16>(a.A_log, hv, (a.flags & KDA2_A_LOG_BF16) != 0) : 0.f;
      gate_mul = mode == KDA2_GATE_SOFTPLUS ? -__expf(al) : __expf(al);
      if (a.flags & KDA2_HAS_DT_BIAS) {
        const bool dt_bf16 = (a.flags & KDA2_DT_BIAS_BF16) != 0;
#pragma unroll
        for (int i = 0; i < KPL; ++i) dtb[i] = load_param<P16>(a.dt_bias, (long)hv * K + key_row(lane, i), dt_bf16);
      }
    }
    const bool l2 = PRELOAD == 0 && HAS_L2NORM && (a.flags & KDA2_QK_L2NORM);
    const bool bsig = HAS_BETA_SIGMOID && (a.flags & KDA2_BETA_SIGMOID);
    const float bmul = (a.flags & KDA2_NEG_EIGVAL) ? 2.f : 1.f;

    // ---- token loop ----------------------------------------------------------------------------
    TokenIn cur, nxt;
    int u = 0;  // preload: the token's slot in the buffer and the table
    if (PRELOAD == 0 && len > 0) load_token(a, bos, h, hv, v0, lane, cur);
    // Bulk staging: the state lands once the first token's inputs (and the gate constants) are in flight; in a
    // preload kernel after the entry block's table is prepared, so that its waits and barriers overlap the tile's
    // flight (as in the k_map = all body). Uniform over the CTA (len, h0 are).
    const auto land = [&]() {
      if constexpr (BULK) {
        if (a.h0 != nullptr) {
          bulk_wait();
          bulk_tile_regs<true>(lane, warp, S);
        }
      }
    };
    if (PRELOAD == 0 || len <= 0) land();
    for (long t = 0; t < len; ++t) {
      float decay[KPL];
      float4 sc = make_float4(1.f, 1.f, 0.f, 0.f);  // preload: the token's prepared rq, rk, q̂·k̂, beta
      if constexpr (PRELOAD > 0) {
        if (t == 0 || u == PRELOAD) {  // the entry block, or past the buffer (a call longer than the bucket)
          land_block<P16>(a, t, len, bos, hv, at.vb, pre_b);
          u = 0;
        }
        if (t == 0) land();
        sc = load_prepared(u, lane, warp, cur, decay);
        ++u;
      } else {
        if (PREFETCH && t + 1 < len) load_token(a, bos + t + 1, h, hv, v0, lane, nxt);
#pragma unroll
        for (int i = 0; i < KPL; ++i) {
          decay[i] = ex2(gate_log2(a, mode, cur.g[i], gate_mul, dtb[i]));  // g <= 0 on every gate path
        }
      }

      float red[NRED];
#pragma unroll
      for (int r = 0; r < NRED; ++r) red[r] = 0.f;
#pragma unroll
      for (int i = 0; i < KPL; ++i) {
#pragma unroll
        for (int j = 0; j < VPW; ++j) {
          S[i][j] *= decay[i];
          red[j] = fmaf(cur.k[i], S[i][j], red[j]);
          red[VPW + j] = fmaf(cur.q[i], S[i][j], red[VPW + j]);
        }
        if constexpr (PRELOAD == 0) {  // (prepared: q and k normalised, q̂·k̂ in the table)
          red[2 * VPW] = fmaf(cur.q[i], cur.q[i], red[2 * VPW]);
          red[2 * VPW + 1] = fmaf(cur.k[i], cur.k[i], red[2 * VPW + 1]);
          red[2 * VPW + 2] = fmaf(cur.q[i], cur.k[i], red[2 * VPW + 2]);
        }
      }
      float rq, rk, qk;
      const float beta = PRELOAD > 0 ? sc.w : bsig ? bmul * sigmoid_fast(cur.beta) : cur.beta;
      const long o_row = ((bos + t) * a.HV + hv) * (long)V + v0;
      if constexpr (!SCATTER) {
        // xor all-reduce: 5 rounds of NRED shuffles; every lane ends with every sum.
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
#pragma unroll
          for (int r = 0; r < (PRELOAD > 0 ? 2 * VPW : NRED); ++r) red[r] += __shfl_xor_sync(0xffffffffu, red[r], off);
        rq = PRELOAD > 0 ? sc.x : l2 ? rsqrtf(red[2 * VPW] + 1e-6f) : 1.f;
        rk = PRELOAD > 0 ? sc.y : l2 ? rsqrtf(red[2 * VPW + 1] + 1e-6f) : 1.f;
        qk = PRELOAD > 0 ? sc.z : red[2 * VPW + 2] * rq * rk;
        float vnew[VPW], out[VPW];
#pragma unroll
        for (int j = 0; j < VPW; ++j) {
          vnew[j] = beta * (cur.v[j] - red[j] * rk);
          out[j] = a.scale * (red[VPW + j] * rq + qk * vnew[j]);
        }
#pragma unroll
        for (int i = 0; i < KPL; ++i) {
          const float kn = cur.k[i] * rk;
#pragma unroll
          for (int j = 0; j < VPW; ++j) S[i][j] = fmaf(kn, vnew[j], S[i][j]);
        }
        if (lane == 0) store_e16<E, VPW>(reinterpret_cast<E*>(a.o) + o_row, out);
      } else {
        // Reduce-scatter: each round halves the values a lane carries (2*VPW - 1 shuffles in all, plus
        // 5 - LOG2_M to finish the last one), instead of 5 * 2*VPW for the all-reduce.
        scatter_rounds<0>(red, lane);
        float sum = red[0];
#pragma unroll
        for (int off = 16 >> LOG2_M; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        float sq = red[2 * VPW], sk = red[2 * VPW + 1], sqk = red[2 * VPW + 2];
        if constexpr (PRELOAD == 0) {
#pragma unroll
          for (int off = 16; off > 0; off >>= 1) {
            if (l2) {
              sq += __shfl_xor_sync(0xffffffffu, sq, off);
              sk += __shfl_xor_sync(0xffffffffu, sk, off);
            }
            sqk += __shfl_xor_sync(0xffffffffu, sqk, off);
          }
        }
        rq = PRELOAD > 0 ? sc.x : l2 ? rsqrtf(sq + 1e-6f) : 1.f;
        rk = PRELOAD > 0 ? sc.y : l2 ? rsqrtf(sk + 1e-6f) : 1.f;
        qk = PRELOAD > 0 ? sc.z : sqk * rq * rk;
        // Lanes 0-15 hold k^T S of their column: v' there. Lanes 16-31 hold q^T S of the same column
        // as lane ^ 16, so one exchange gives them v' for the read-out.
        const float vn = beta * (cur.v[0] - sum * rk);
        const float vn_pair = __shfl_xor_sync(0xffffffffu, vn, 16);
        float vnew[VPW];
#pragma unroll
        for (int j = 0; j < VPW; ++j) vnew[j] = __shfl_sync(0xffffffffu, vn, j << SCATTER_SHIFT);
#pragma unroll
        for (int i = 0; i < KPL; ++i) {
          const float kn = cur.k[i] * rk;
#pragma unroll
          for (int j = 0; j < VPW; ++j) S[i][j] = fmaf(kn, vnew[j], S[i][j]);
        }
        if (lane >= 16 && (lane & ((1 << SCATTER_SHIFT) - 1)) == 0)
          reinterpret_cast<E*>(a.o)[o_row + scatter_col(lane)] = X::from_f(a.scale * (sum * rq + qk * vn_pair));
      }
      if (INTERMEDIATE && a.intermediate != nullptr)  // the state after this token (speculative-decode rollback)
        store_state_regs(reinterpret_cast<SE*>(a.intermediate) + ((bos + t) * a.HV + hv) * (long)K * V, lane, v0, S);
      if constexpr (PRELOAD == 0) {  // (with preload each token's inputs are read at the top of its step)
        if (PREFETCH) cur = nxt;
        else if (t + 1 < len) load_token(a, bos + t + 1, h, hv, v0, lane, cur);  // correct beyond the bucket too
      }
    }

    // ---- state out -----------------------------------------------------------------------------
    if (a.ht == nullptr) return;
    if constexpr (BULK) {
      bulk_tile_regs<false>(lane, warp, S);
      bulk_out(a, srow, hv, at.vb);
    } else if constexpr (SMEM_STAGING) {
#pragma unroll
      for (int i = 0; i < KPL; ++i) store_f32<VPW, false>(&tile[key_row(lane, i) * SMEM_STRIDE + warp * VPW], S[i]);
      __syncthreads();
#pragma unroll
      for (int it = 0; it < FILL_ITERS; ++it) {
        const int f = it * WARPS * 32 + threadIdx.x;
        if (f < FILL_TOTAL)
          st_state4(reinterpret_cast<SE*>(a.ht) + state_off + (long)(f / (BV / 4)) * V + v_cta + (f % (BV / 4)) * 4,
                    *reinterpret_cast<const float4*>(&tile[(f / (BV / 4)) * SMEM_STRIDE + (f % (BV / 4)) * 4]));
      }
    } else {
      store_state_regs(reinterpret_cast<SE*>(a.ht) + state_off, lane, v0, S);
    }
  }
};

}  // namespace recurrent
}  // namespace kda2
