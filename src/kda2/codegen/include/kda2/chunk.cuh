// KDA² chunkwise-parallel KDA forward (docs/DESIGN.md §1), chunk C = 64:
//   prep   token-parallel, one CTA per (chunk, value head, sequence):
//       gate activation + in-chunk cumulative sum Γ (log2 units), q/k l2norm, β,
//       A = [β_i k_i·(k_j ⊙ 2^(Γi−Γj))]_{j<i} and Aqk = [scale q_i·(k_j ⊙ 2^(Γi−Γj))]_{j≤i},
//       T = (I + A)^-1, w = T diag(β) (k ⊙ 2^Γ), u = T diag(β) v, qg = scale q ⊙ 2^Γ, kg = k ⊙ 2^(Γlast−Γ),
//       written to a workspace slot per (chunk, head).
//   state  the serial pass, one CTA per (value slice of BLOCK_V columns, head, sequence):
//       per chunk, v_new = u − w S, o = qg S + Aqk v_new, S ← Diag(2^Γlast) S + kgᵀ v_new,
//       with Sᵀ (fp32) held in mma.sync accumulators (each warp of a pair holds half of K) and the next
//       chunk's tiles in flight (bulk copies on sm_90, cp.async on sm_80).
//   split  (docs/DESIGN.md §1 exact split, when a.split > 1) the state pass runs per segment: first FOLD, the
//       same recurrence on [M | B] from [I | 0] gives each segment's transition; `combine` chains them into
//       every segment's true start state; then EMIT runs each segment from it. Exact, data-independent.
// Every exponent is ≤ 0, so the unbounded softplus gate is exact: off-diagonal 16×16 blocks of A use
// the first row r of the later sub-chunk as anchor, 2^(Γi−Γr)·2^(Γr−Γj) with both factors ≤ 1, on
// tensor cores (16-bit: E); the four diagonal blocks anchor at their middle row m, 2^(Γi−Γm)·(1 / 2^(Γj−Γm)), on
// tensor cores (tf32), except channels whose decay in a half block is too strong for it (a row per quarter block on
// tensor cores, and what that cannot hold on CUDA cores, exact).
//
// Input dtypes (docs/DESIGN.md §1, "fp16 inputs"): the prep and state kernels are templates on the q/k/v/o
// element type E (bf16 or fp16, one entry each, the fold one too). E is also every 16-bit intermediate's type
// and the 16-bit mma operand type (Tc16<E>): the workspace's w, qg, kg, uᵀ, Aqk, the prep's A-block factors,
// right-hand side k 2^Γ and T diag β as an operand, the state and v_new as operands. For fp16 that is what
// FLA's fp16 path keeps (3 more mantissa bits than bf16); the bf16 code is unchanged. What stays wider: Γ,
// A and T (fp32), the diagonal A blocks (tf32 / fp32), every accumulator, the state S and 2^Γlast (fp32).
// fp16's range (65504; subnormals to 2^-24) against each fp16 value, for l2-normalised keys and β ∈ [0, 2]:
//   qg, kg, Aqk, the A-block factors: |x| ⊙ 2^(≤ 0) (Aqk: scale q·k ≤ scale) — within the inputs' range; they
//     can only underflow, by ≤ 2^-25 |x| absolute, on terms already decayed below 2^-14.
//   k 2^Γ: ≤ |k| (v, the other right-hand side, is an input as it landed).
//   T = (I + A)^-1: column j is the in-chunk delta rule's u for β v = e_j; its state after token j has norm 1,
//     each later step's I − β k kᵀ (β ≤ 2, unit k) and decay have norm ≤ 1, so |T_ij| ≤ β_i ≤ 2 (i > j), and
//     the operand T diag β ≤ 4.
//     Likewise u_i = β_i (v_i − S_{i−1}ᵀ k_i) with ||S_{i−1}|| ≤ Σ_{m<i} β_m |v_m|: |u_i| ≤ 254 max |v_m|
//     (row norms), |w_i| ≤ 254 (k 2^Γ has norm ≤ 1).
//   S, v_new: ||S_t|| ≤ ||h0|| + Σ β |v| grows at most linearly; in use the decay and the delta rule's
//     overwrite (the component of S along k moves toward v) keep it near the values' scale, and v_new_i =
//     β_i (v_i − S_{i−1}ᵀ k_i) is on the same scale. An entry past 65504 (or unnormalised keys, huge h0) rounds to ±Inf
//     (cvt.rn, not saturating), which reaches o and ht as Inf / NaN rather than a wrong finite value — as
//     FLA, which rounds its per-chunk state to fp16 for the same products.
//
// The build renders one small .cu per variant (templates/chunk.cu.j2): a config struct and the
// extern "C" entries that call Kernels<Cfg>::prep / ::state<EMIT> / ::state<FOLD> / ::combine. The config struct provides (all
// static constexpr):
//   int K, V, BT, BLOCK_V, STAGES         head dims, tokens per chunk, value columns per state CTA,
//                                         state pipeline depth
//   int LDS_KV, LDS_U, LDS_G, LDS_T, LDS_T16, LDS_Y, LDS_O, LDS_X   shared-memory row strides (elements) of
//                                         the q/k/v, uᵀ, Γ, T, 16-bit T, block-level scratch, o staging and
//                                         combine tiles
//   bool SWZ_W, SWZ_QG, SWZ_KG, SWZ_AQK   whole-tile-copied tiles XOR-swizzled or not
//                                         — every layout is the TIR stage's decision (kda2/tir/chunk.py
//                                         declares each tile and its accesses; the kda2.bank_pad pass
//                                         picks the pad or the swizzle), none is chosen here
//   int PREP_THREADS, STATE_THREADS, PREP_SMEM_BYTES, STATE_SMEM_BYTES   launch shapes and dynamic
//                                         shared memory of the plan (kda2.chunk_smem; checked below)
//   int COMBINE_THREADS, COMBINE_COLS     the split combine's block and value columns (kda2/plan/smem.py)
//   bool HAS_SOFTPLUS, HAS_LOWER_BOUND    gate activations compiled in (precomputed needs no code)
//   bool V_FIRST                          states [V, K] (else [K, V])
//   bool BULK                             sm_90 bulk copies on an mbarrier (else cp.async)
//   bool PREP_BFS                         the prep's w / u by blocked substitution on warpgroup MMAs (sm_90a; the
//                                         plan's prep_wu knob "bfs"), else T by block levels and mma.sync products
//   bool PREP_TMA                         the prep's q / k / v and fp32 raw-gate tiles by tensor copies (the plan's
//                                         prep_tma: sm_90, strides that fit a box row); its entry takes PrepMaps
#pragma once
#include <stdint.h>
#include <cuda.h>   // CUtensorMap (the prep's PrepMaps)
#include <cuda_bf16.h>
#include "kda2/abi.h"
#include "kda2/bfs.cuh"
#include "kda2/elem16.cuh"
#include "kda2/gate.cuh"
#include "kda2/mma.cuh"
#include "kda2/wgmma.cuh"

namespace kda2::chunk {

// The tensor maps of a call's q, k, v and fp32 raw gate for a PREP_TMA prep (the library encodes them per call,
// library.cpp.j2 encode_prep_maps, the same layout): each {K, heads, tokens}, a box of {LDS_KV or LDS_G, 1, BT} —
// one padded shared row per token, its columns past K outside the tensor, so they land as zeros.
struct PrepMaps {
  CUtensorMap q, k, v, g;
};

// The layout of w, qg, kg and Aqk (KDA2_CHUNK rows each) in a workspace slot and, after one linear copy of the
// whole tile (one bulk copy on sm_90), in shared memory: with XOR on (the TIR stage's decision, Cfg::SWZ_*), the
// 16-byte pieces of a row are XOR-swizzled by row (piece ^= row % 8), so the 8 rows of an ldmatrix phase hit 8
// piece slots. Rows of up to 128 elements are stored as 64-column panels (kda2/wgmma.cuh panel128_offset): the
// same bytes are then the 128-byte-swizzled operand a warpgroup MMA reads by descriptor (state_wg, K ≤ 128);
// longer rows (K = 256) stay row-major. Either placement has the banks of the row-major swizzle the TIR stage
// models (row pitches of 128 and 256 bytes map to the same banks; tests/test_tir.py checks it).
template <bool XOR>
__host__ __device__ constexpr int swz(int row, int col, int row_len) {
  return !XOR ? row * row_len + col
       : row_len <= 128 ? panel128_offset(row, col, KDA2_CHUNK)
       : row * row_len + ((((col >> 3) ^ (row & 7)) << 3) | (col & 7));
}

// Eight consecutive floats (16-byte aligned) of shared memory as four (x, y) pairs, in two 16-byte reads.
__device__ __forceinline__ void load_g8(const float* p, float2 (&out)[4]) {
  const float4 lo = *reinterpret_cast<const float4*>(p), hi = *reinterpret_cast<const float4*>(p + 4);
  out[0] = make_float2(lo.x, lo.y); out[1] = make_float2(lo.z, lo.w);
  out[2] = make_float2(hi.x, hi.y); out[3] = make_float2(hi.z, hi.w);
}

// N floats (whole 128-byte lines) prefetched into L2.
template <int N>
__device__ __forceinline__ void prefetch_l2_lines(const float* p) {
  static_assert(N % 32 == 0, "whole 128-byte lines");
#pragma unroll
  for (int b = 0; b < N / 32; ++b) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + 32 * b));
}

// How far (log2) a 16-token block's factors may reach about its middle-row anchor, 2^±DIAG_RANGE, before a channel
// leaves the tensor cores for the exact path (the prep's diagonal blocks, the fused kernel's chunks). At 2^±96 a factor
// times a 16-bit input stays finite below 2^31 and normal above 2^-30 (a smaller element adds < 2^-30 of its partner
// and is flushed). Measured on the H200 with the lower-bound gate (up to 7.2 per token in log2, ≈ 54 per block on
// average): at 2^64 so many channels took the exact path that the prep kernel took 1.11 ms on P1, at 2^96 0.78 ms.
constexpr float DIAG_RANGE = 96.f;

struct SeqBounds { int64_t bos, len; };
__device__ __forceinline__ SeqBounds seq_bounds(const KDA2RecurrentArgs& a, int n) {
  if (a.cu_seqlens) { const int64_t b = a.cu_seqlens[n]; return {b, a.cu_seqlens[n + 1] - b}; }
  return {static_cast<int64_t>(n) * a.T, a.T};
}

// The exact split (docs/DESIGN.md §1): a sequence of nch chunks is cut into a.split segments of
// ceil(nch / split) chunks — a function of the length only, never of the data. Trailing segments of a
// short sequence are empty; `last` is the last non-empty one (0 for an empty sequence: it still writes ht).
struct Segment { int64_t c0, c1; int last; };
__device__ __forceinline__ Segment segment_of(int64_t nch, int split, int seg) {
  const int64_t len = nch > 0 ? (nch + split - 1) / split : 1;
  const int64_t c0 = seg * len, c1 = c0 + len < nch ? c0 + len : nch;
  return {c0, c1 > c0 ? c1 : c0, nch > 0 ? static_cast<int>((nch - 1) / len) : 0};
}

// Which state pass a launch of the state kernel runs. EMIT: the outputs of a segment from its true start
// state (split == 1: the whole sequence from h0). FOLD: the segment's transition — the same recurrence on
// the augmented state [M | B] (K × (K + V)) from [I | 0], with u = 0 in the M columns and no outputs.
enum class Pass { EMIT, FOLD };

// Why the state kernel's warps come in pairs that split K: one warp per 16 value columns issues ~210
// dependent mma per chunk on one SM sub-partition, and that chain, not memory, set the pace (1.9 µs per
// chunk). With K split the chain is ~105 mma per warp; the price is one exchange of partial sums (v_new
// needs all of K) per chunk, behind this barrier of the pair's 64 threads.
__device__ __forceinline__ void pair_sync(int pair) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(1 + pair) : "memory");  // barrier 0 is __syncthreads
}

// The prep's pair of warps per 16-row sub-chunk I (step 3: the two halves of K meet in shared memory): named
// barrier 1 + I of the pair's 64 threads, the id an immediate (a register id would reserve all 16).
__device__ __forceinline__ void prep_pair_sync(int I) {
  switch (I) {
    case 0: asm volatile("bar.sync 1, 64;\n" ::: "memory"); break;
    case 1: asm volatile("bar.sync 2, 64;\n" ::: "memory"); break;
    case 2: asm volatile("bar.sync 3, 64;\n" ::: "memory"); break;
    default: asm volatile("bar.sync 4, 64;\n" ::: "memory"); break;
  }
}

// prep_pair_sync with an OR over the pair's threads of `pred` (bar.red.or): step 3's exchange learns whether any
// channel of either K half took the exact path.
__device__ __forceinline__ bool prep_pair_sync_or(int I, bool pred) {
  uint32_t r;
  const uint32_t p = pred ? 1u : 0u;
#define KDA2_PAIR_RED(ID) asm volatile("{\n .reg .pred a, b;\n setp.ne.u32 a, %1, 0;\n bar.red.or.pred b, " #ID ", 64, a;\n selp.u32 %0, 1, 0, b;\n}\n" : "=r"(r) : "r"(p) : "memory")
  switch (I) {
    case 0: KDA2_PAIR_RED(1); break;
    case 1: KDA2_PAIR_RED(2); break;
    case 2: KDA2_PAIR_RED(3); break;
    default: KDA2_PAIR_RED(4); break;
  }
#undef KDA2_PAIR_RED
  return r != 0;
}

// The prep's diagonal inverse (step 5's first part, run at the end of step 4 by pair 1: Kernels::prep_item): named
// barrier DIAG_INV_BAR, which the other pairs' part-0 warps arrive at once their A_II is final and their part-1 warps
// once they have read their Aqk partials (T_II is written over them), and pair 1's two warps wait at: all 8 warps.
// DIAG_PAIR_BAR: pair 1's two warps between reading the four A_II and writing the T_II (a block's upper part holds
// another block's reflected A).
constexpr int DIAG_INV_BAR = 5, DIAG_INV_THREADS = 8 * 32, DIAG_PAIR_BAR = 6;
// The gate scan's hand-over of each part's total (step 2b): the first part arrives, the later parts wait (all 8 warps).
constexpr int SCAN_BAR = 7;

// Warps 4–7's copy of the four inverted diagonal blocks during level 1: thread p (0..127), piece m (0, 1) copies
// columns 4 (p % 4) .. + 3 of this row; a quarter-warp's two rows are 2 apart (rows base, base + 2 of a block).
__device__ __forceinline__ int diag_copy_row(int p, int m) {
  const int idx = p + 128 * m, q = idx >> 3, q8 = q & 7;
  return 16 * (q >> 3) + (q8 & 1) + 4 * (q8 >> 1) + 2 * ((idx >> 2) & 1);
}

template <class Cfg>
struct Kernels {
  static constexpr int K = Cfg::K, V = Cfg::V, BT = Cfg::BT, BLOCK_V = Cfg::BLOCK_V;
  static constexpr int STAGES = Cfg::STAGES;
  static constexpr int LDS_KV = Cfg::LDS_KV, LDS_U = Cfg::LDS_U, LDS_G = Cfg::LDS_G;
  static constexpr int LDS_T = Cfg::LDS_T, LDS_T16 = Cfg::LDS_T16, LDS_O = Cfg::LDS_O, LDS_Y = Cfg::LDS_Y, LDS_X = Cfg::LDS_X;
  static constexpr bool SWZ_W = Cfg::SWZ_W, SWZ_QG = Cfg::SWZ_QG, SWZ_KG = Cfg::SWZ_KG, SWZ_AQK = Cfg::SWZ_AQK;
  static constexpr int PREP_THREADS = Cfg::PREP_THREADS, STATE_THREADS = Cfg::STATE_THREADS;
  static constexpr int PREP_SMEM_BYTES = Cfg::PREP_SMEM_BYTES, STATE_SMEM_BYTES = Cfg::STATE_SMEM_BYTES;
  static constexpr bool HAS_SOFTPLUS = Cfg::HAS_SOFTPLUS;
  static constexpr bool HAS_LOWER_BOUND = Cfg::HAS_LOWER_BOUND;
  static constexpr bool V_FIRST = Cfg::V_FIRST;

  // The state kernel's products (Cfg::STATE_WGMMA, the plan's state_mma): mma.sync with a pair of warps (one per
  // half of K) per 16 value columns, or (sm_90a) one warpgroup per 64 value columns with Sᵀ over all of K in
  // warpgroup-MMA accumulators (state_wg).
  static constexpr bool WG = Cfg::STATE_WGMMA;
  // Overlapped launches: a prep item starts at most PREP_LEAD chunks ahead of its chain's state pass (Kernels::prep,
  // wait_ready). Unheld, the prep ran so far ahead that the slots were evicted from L2 before the state pass read
  // them, and a faster prep made the overlapped call slower (P2 / P5 on the H200, 2026-12-02: unheld 0.84 / 3.37 ms,
  // 8 chunks 0.77 / 2.99). A chain steps no faster than PREP_LEAD items per item latency, so the lead must cover
  // the slowest items over a state step: a head whose decay sends its diagonal blocks to the exact path has items of
  // 40–56 µs against 13 (2.3 µs a step), and at 8 chunks its chain took 2.2× the call's other chains (B1 T10240 H24:
  // 0.925 ms overlapped, 0.45 plain). At 24 that call takes 0.43 ms, P2 0.68 instead of 0.69–0.70, P5 and the
  // 66-chain calls unchanged (docs/DESIGN.md §1, experiments/2026-12-04-splitrule calls 8–10).
  static constexpr int PREP_LEAD = 24;
  static constexpr int STATE_WARPS = WG ? 4 * (BLOCK_V / 64) : 2 * (BLOCK_V / 16);
  static constexpr int KH = K / 2;
  // sm_90: the chunk's shared tiles (w, qg, kg, Aqk|2^Γlast) arrive by four bulk copies (the copy engine) on an
  // mbarrier. Measured on the H200 (P5, block_v 32): state pass 1.94 ms with cp.async, 1.73 ms with bulk copies;
  // multicasting them to a cluster of the head's CTAs was slower (4.4 ms: the per-chunk cluster barrier).
  static constexpr bool BULK = Cfg::BULK;
  // sm_90: the prep's tiles by one tensor copy each (the copy engine, on three mbarriers: the raw gate, q and k, v)
  // instead of 16-byte cp.async pieces from every thread (the prologue and the copies were 8.7 % of the prep's
  // instructions, H200, P1, ncu: experiments/2026-12-03-pipes). Same bits, P1–P5 1.3–1.9 % faster (docs/DESIGN.md §1).
  // A 16-bit raw gate still comes by cp.async (its rows would be 2·LDS_G 16-bit elements a box row).
  static constexpr bool PREP_TMA = Cfg::PREP_TMA;
  // sm_90a: w and u by blocked forward substitution over the four sub-chunks, one warpgroup each, instead of step 5's
  // block levels and step 6's mma.sync products (docs/DESIGN.md §1, "What each of those changes costs in accuracy":
  // the K' products in 16 bits on register-A wgmma, the diagonal T_II diag β product in tf32; prep_wu_bfs).
  static constexpr bool PREP_BFS = Cfg::PREP_BFS;
  static_assert(!PREP_BFS || BULK, "blocked substitution: sm_90a warpgroup MMAs");
  static_assert(!PREP_TMA || (BULK && LDS_KV <= 256 && LDS_G <= 256 && LDS_KV * 2 % 16 == 0 && LDS_G * 4 % 16 == 0),
                "tensor-copied prep tiles: sm_90, a padded row one box row (at most 256 elements, 16-byte multiple)");
  // Head dims (spec/knobs.py CHUNK_HEAD_DIMS): K = V, a multiple of 32 (the prep's two K halves of 16-column
  // k-steps) whose 16-byte row pieces a warp can hold (K / 8 ≤ 32) and a power of two (the gate scan's
  // threads-per-channel split and the l2norm's shuffle tree).
  static_assert(K == V && (K == 64 || K == 128 || K == 256), "chunk head dims: K = V ∈ {64, 128, 256}");
  static_assert(BT == 64 && PREP_THREADS == 256, "chunk of 64 tokens; two prep warps per 16-row sub-chunk");
  // The prep's 256 threads over the key channels: KP 16-byte pieces per q/k/v row, PREP_ROWS rows per pass of
  // the block; in the gate scan SCAN_PARTS threads per channel, each over SCAN_ROWS consecutive rows.
  static constexpr int KP = K / 8, KP_LOG2 = K == 64 ? 3 : K == 128 ? 4 : 5, PREP_ROWS = PREP_THREADS / KP;
  static constexpr int SCAN_PARTS = PREP_THREADS / K, SCAN_ROWS = BT / SCAN_PARTS;
  // Two prep CTAs per SM while K ≤ 128 (registers capped at 128, the prep wants warps in flight); at K = 256
  // its shared memory (≈ 186 KB) admits one per SM on every arch, and the cap would only force spills.
  static constexpr int PREP_MIN_BLOCKS = K <= 128 ? 2 : 1;
  static_assert(STATE_THREADS == STATE_WARPS * 32 && BLOCK_V % (WG ? 64 : 16) == 0 && V % BLOCK_V == 0, "state tiling");
  static_assert(!WG || (BULK && SWZ_W && SWZ_QG && SWZ_KG && SWZ_AQK),
                "wgmma state: sm_90 bulk copies and the panel (XOR) layout of every tile it reads by descriptor");
  static_assert(K % BLOCK_V == 0, "a FOLD slice lies inside M or inside B");
  static_assert(LDS_KV % 8 == 0 && LDS_U % 8 == 0 && LDS_O % 8 == 0 && LDS_G % 4 == 0 && LDS_T % 4 == 0 &&
                LDS_X % 4 == 0, "16-byte aligned rows for cp.async / vector access");

  // Workspace slot of one (chunk, value head): w, qg, kg [BT][K], uᵀ [V][BT], Aqk [BT][BT] (16-bit: the input
  // dtype E), 2^Γlast [K] fp32. The layout's one home is kda2/artifact/abi.py (kda2/abi.h): the library and the
  // runtime size the workspace from the same offsets.
  static_assert(BT == KDA2_CHUNK, "the workspace layout is defined for the ABI's chunk size");
  static constexpr int64_t OFF_W = KDA2_CHUNK_OFF_W(K, V), OFF_QG = KDA2_CHUNK_OFF_QG(K, V);
  static constexpr int64_t OFF_KG = KDA2_CHUNK_OFF_KG(K, V), OFF_U = KDA2_CHUNK_OFF_UT(K, V);
  static constexpr int64_t OFF_AQ = KDA2_CHUNK_OFF_AQK(K, V), OFF_GL = KDA2_CHUNK_OFF_GLAST(K, V);
  static constexpr int64_t SLOT_BYTES = KDA2_CHUNK_SLOT_BYTES(K, V);
  static_assert(SLOT_BYTES % 16 == 0, "slots stay 16-byte aligned");

  // Shared memory of the prep kernel: q, v, k tiles (16-bit: the input dtype), Γ (fp32), A (fp32),
  // β. From step 5 on, T (fp32 [BT][LDS_T]) lives over k and, where its row stride (the TIR stage's choice)
  // makes it longer than k, runs on into the dead Γ tile: hence k right before Γ. The block levels' scratch
  // and the uᵀ staging use the rest of the Γ tile, from P_SCR on; step 6's 16-bit T lies over the dead A, its w
  // staging over k (T is dead there once T16 is made).
  static constexpr int P_Q = 0, P_V = P_Q + BT * LDS_KV * 2, P_K = P_V + BT * LDS_KV * 2, P_G = P_K + BT * LDS_KV * 2;
  static constexpr int P_T = P_G + BT * LDS_G * 4, P_B = P_T + BT * LDS_T * 4, P_END = P_B + BT * 4;
  static_assert(P_END == PREP_SMEM_BYTES, "prep shared memory layout differs from the plan");
  static_assert(!PREP_TMA || (P_Q % 128 == 0 && P_V % 128 == 0 && P_K % 128 == 0 && P_G % 128 == 0),
                "tensor copies land at 128-byte aligned shared addresses");
  static constexpr int T_OVER = BT * LDS_T * 4 > BT * LDS_KV * 2 ? BT * LDS_T * 4 - BT * LDS_KV * 2 : 0;
  static constexpr int P_SCR = P_G + (T_OVER + 15) / 16 * 16;   // first byte of Γ that T leaves free
  static_assert(P_G == P_K + BT * LDS_KV * 2 && P_SCR - P_G < BT * LDS_G * 4, "T over k runs on into Γ only");
  static_assert(P_SCR + 8 * 32 * LDS_Y * 4 <= P_T, "the block levels' scratch (8 warps × [32][LDS_Y]) fits in Γ after T");
  static_assert(LDS_Y % 2 == 0, "float2 rows of the scratch");
  static_assert(P_SCR + V * LDS_U * 2 <= P_T, "uᵀ staging fits in Γ after T (w's is over k, the same size)");
  static_assert(LDS_T16 % 8 == 0 && BT * LDS_T16 * 2 <= BT * LDS_T * 4, "16-bit T (16-byte rows) fits over the dead A tile");
  // PREP_BFS: the 16-bit K' panels (three row blocks of 16 rows × 64 k, 128-byte swizzled, the wgmma's B) and then
  // the uᵀ staging in the Γ tile, dead once step 4 is done; the panels' 1024-byte alignment is taken inside the first
  // 7 KB (the dynamic shared memory starts after the static barriers, so it is only 128-byte aligned).
  static constexpr int P_BFS_U = P_G + BFS_PANELS_BYTES + 1024;
  static_assert(!PREP_BFS || P_BFS_U + V * LDS_U * 2 <= P_T, "the K' panels and the u staging fit in the dead Γ tile");
  // Where element (i, j), j < i, of A lies in the A tile from step 3 on: reflected through the tile's centre, in the
  // strict upper triangle (prep_item step 3: the two K halves hand over at once).
  static __device__ __forceinline__ int a_refl(int i, int j) { return (BT - 1 - i) * LDS_T + BT - 1 - j; }

  // Shared memory of the state kernel: STAGES × (w, qg, kg [BT][K], Aqk [BT][BT] (swizzled, as in the slot),
  // 2^Γlast, uᵀ slice [BLOCK_V][LDS_U]), then per warp an exchange tile and an o staging tile [32][LDS_O],
  // then one mbarrier slot per stage.
  static constexpr int S_W = 0, S_QG = S_W + BT * K * 2, S_KG = S_QG + BT * K * 2, S_AQ = S_KG + BT * K * 2;
  static constexpr int S_GL = S_AQ + BT * BT * 2, S_U = S_GL + K * 4;
  // wgmma: stages at 1024-byte boundaries (the descriptors' 128-byte swizzle atoms; kda2/plan/smem.py WG_ALIGN) and
  // one uᵀ slice for all of them, after the last stage (unpadded) at S_UB: a 64-column two-stage pass then fits on an
  // SM beside a prep CTA (docs/DESIGN.md §1, the overlap). uᵀ is read once per chunk, early (v_new), and each warp
  // reads only its own rows, so a warp copies its rows of the next chunk as soon as its lanes are past that read
  // (state_wg, load_ut_warp).
  static constexpr int S_STAGE = WG ? (S_U + 1023) / 1024 * 1024 : S_U + BLOCK_V * LDS_U * 2;
  static constexpr int S_UB = WG ? (STAGES - 1) * S_STAGE + S_U : 0;
  static_assert(OFF_QG == OFF_W + BT * K * 2 && OFF_KG == OFF_QG + BT * K * 2 && OFF_GL == OFF_AQ + BT * BT * 2,
                "w|qg|kg and Aqk|2^Γlast are contiguous in the slot: two linear copies per chunk");
  // Exchange tile per warp: its partial Sᵀwᵀ (8 float4 per lane) and o of the partner's tokens (4 float4).
  static constexpr int XCH_F4 = 12;
  // (wgmma: neither, its MMA sums over all of K and o is staged in the consumed stage's w tile)
  static constexpr int S_X = WG ? S_UB + BLOCK_V * LDS_U * 2 : STAGES * S_STAGE;
  static constexpr int S_O = S_X + (WG ? 0 : STATE_WARPS * XCH_F4 * 32 * 16);
  static constexpr int S_MB = S_O + (WG ? 0 : STATE_WARPS * (BT / 2) * LDS_O * 2);   // one mbarrier (8 B, 16 B apart) per stage
  static constexpr int S_END = S_MB + 16 * STAGES;
  static_assert(S_END == STATE_SMEM_BYTES, "state shared memory layout differs from the plan");
  // Shared tiles per chunk: four linear pieces (w, qg, kg, Aqk|2^Γlast); bytes landing in each CTA.
  static constexpr uint32_t TILE_BYTES = 3 * BT * K * 2 + BT * BT * 2 + K * 4;

  // Workspace slot of chunk c of sequence n: ids bos/64 + n + c are distinct across sequences (the
  // library sizes the workspace for total/64 + N + 1 ids), so partial chunks never overlap.
  static __device__ __forceinline__ int64_t slot_index(const KDA2RecurrentArgs& a, int64_t bos, int n, int64_t c, int hv) {
    return (bos / BT + n + c) * a.HV + hv;
  }
  static __device__ __forceinline__ uint8_t* slot_ptr(const KDA2RecurrentArgs& a, int64_t bos, int n, int64_t c, int hv) {
    return static_cast<uint8_t*>(a.workspace) + slot_index(a, bos, n, c, hv) * SLOT_BYTES;
  }
  // The overlap (docs/DESIGN.md §1; a.flags & KDA2_CHUNK_OVERLAP): the ready region's work counter and the
  // ready flag of a slot, which the prep sets to 1 (release) once the slot is written and the state pass waits for
  // (acquire) before it copies the slot in, then sets to 2: the chain has reached it (PREP_LEAD). The library
  // zeroes the region before each overlapped launch.
  static __device__ __forceinline__ int* ready_region(const KDA2RecurrentArgs& a) {
    return reinterpret_cast<int*>(static_cast<uint8_t*>(a.workspace) + kda2_ready_offset(&a, K, V));
  }
  static __device__ __forceinline__ int* ready_flag(const KDA2RecurrentArgs& a, int64_t bos, int n, int64_t c, int hv) {
    return ready_region(a) + KDA2_READY_HEAD_BYTES / 4 + slot_index(a, bos, n, c, hv);
  }
  // Thread 0 waits for the slot's flag, then the CTA's copies of it may start (the bulk copies read through the
  // async proxy: the proxy fence orders them after the acquire).
  static __device__ __forceinline__ void wait_ready(const KDA2RecurrentArgs& a, int64_t bos, int n, int64_t c, int hv) {
    if (threadIdx.x == 0) {
      const int* f = ready_flag(a, bos, n, c, hv);
      int r;
      for (;;) {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(r) : "l"(f) : "memory");
        if (r) break;
        __nanosleep(64);
      }
      // the chain has reached this slot: a prep item PREP_LEAD chunks later may start (Kernels::prep)
      if (r == 1) asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" ::"l"(f), "r"(2) : "memory");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      asm volatile("fence.proxy.async;" ::: "memory");
#endif
    }
    __syncthreads();
  }
  // sm_90: one chunk's shared tiles (w, qg, kg, Aqk|2^Γlast: four linear pieces) into the stage at `st` by bulk
  // copies completing on `bar`; one thread sends them.
  static __device__ __forceinline__ void bulk_tiles(uint32_t st, uint32_t bar, const uint8_t* slot) {
    mbar_expect_tx(bar, TILE_BYTES);
#pragma unroll
    for (int p = 0; p < 3; ++p) bulk_copy(st + S_W + p * BT * K * 2, slot + OFF_W + p * BT * K * 2, BT * K * 2, bar);
    bulk_copy(st + S_AQ, slot + OFF_AQ, BT * BT * 2 + K * 4, bar);
  }
  // The CTA's rows vc .. vc + BLOCK_V − 1 of uᵀ [V][BT] (its own, not shared) into the tile at `su` by cp.async from
  // every thread. Loop trip counts are compile-time and strides multiples of 16 pieces: one instruction per piece,
  // immediate offsets.
  static __device__ __forceinline__ void load_ut(uint32_t su, const uint8_t* slot, int vc, int tid) {
    static_assert((BLOCK_V * BT / 8) % STATE_THREADS == 0, "uᵀ load tiling");
    const int v0 = tid / (BT / 8), i = (tid % (BT / 8)) * 8;
    const uint8_t* src = slot + OFF_U + ((vc + v0) * BT + i) * 2;
    const uint32_t dst = su + (v0 * LDS_U + i) * 2;
#pragma unroll
    for (int m = 0; m < BLOCK_V * BT / 8 / STATE_THREADS; ++m)
      cp_async16(dst + m * (STATE_THREADS / (BT / 8)) * LDS_U * 2, src + m * STATE_THREADS * 16);
  }

  // wgmma state pass: warp w's own rows of the CTA's uᵀ slice, 16·(w % 4) + 64·(w / 4) .. + 15 (the rows its v_new
  // reads: state_wg), into the slice at `su` by cp.async from its lanes, 8 lanes per 128-byte row. A warp waits only
  // for its own copies (cp.async.wait_group, then __syncwarp), so neither the wait nor the refill needs the CTA.
  static __device__ __forceinline__ void load_ut_warp(uint32_t su, const uint8_t* slot, int vc, int warp, int lane) {
    static_assert(BT / 8 == 8 && 16 * STATE_WARPS == BLOCK_V, "16 rows of 8 pieces per warp");
    const int r = 64 * (warp >> 2) + 16 * (warp & 3) + (lane >> 3), p = lane & 7;
    const uint8_t* src = slot + OFF_U + ((vc + r) * BT + 8 * p) * 2;
    const uint32_t dst = su + (r * LDS_U + 8 * p) * 2;
#pragma unroll
    for (int m = 0; m < 4; ++m) cp_async16(dst + 4 * m * LDS_U * 2, src + 4 * m * BT * 2);
  }

  // The raw gate rows of a chunk into the Γ tile (row pitch LDS_G floats) by cp.async, GP 16-byte pieces per row
  // (K/4 for an fp32 gate, K/8 for a 16-bit one); rows past the sequence zero-filled. Thread tid copies piece
  // tid % GP of rows tid / GP + (PREP_THREADS / GP)·m: one source pointer, one constant row stride.
  template <int GP>
  static __device__ __forceinline__ void load_gate_rows(const KDA2RecurrentArgs& a, float* sG, int64_t t0, int hv, int rows,
                                                        int tid) {
    static_assert(PREP_THREADS % GP == 0 && (BT * GP) % PREP_THREADS == 0, "whole rows per pass of the block");
    constexpr int RPP = PREP_THREADS / GP;   // rows per pass
    const int sgm = tid % GP, r0 = tid / GP, gbytes = GP == K / 4 ? 4 : 2;
    const uint8_t* src = static_cast<const uint8_t*>(a.g) + ((t0 + r0) * a.HV + hv) * K * gbytes + sgm * 16;
    const int64_t step = static_cast<int64_t>(RPP) * a.HV * K * gbytes;
    uint8_t* dst = reinterpret_cast<uint8_t*>(sG) + r0 * LDS_G * 4 + sgm * 16;
#pragma unroll
    for (int m = 0; m < BT / RPP; ++m) {
      uint8_t* d = dst + m * RPP * LDS_G * 4;
      if (r0 + RPP * m < rows) cp_async16(smem_u32(d), src + m * step);
      else *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }

  // The bodies of the two kernels; the entries pass their parameter on. prep takes the arguments by
  // value: NVVM optimizes a callee before inlining it, and through a reference the arguments might alias
  // the prep's shared-memory stores, so NVVM shaped its branches differently than in a kernel body; a
  // private copy is as unaliased as the kernel parameter. state takes a reference: a copy cost it one
  // register (161 -> 162 on sm_90a, 166 -> 167 on sm_80).
  // Prep: one CTA (8 warps) per (chunk, value head, sequence); launch with PREP_THREADS threads,
  // PREP_SMEM_BYTES of dynamic shared memory, grid (chunks, HV, N).
  // E: the q/k/v/o element type (__nv_bfloat16 or __half; one entry per input dtype built).
  // maps: the entry's PrepMaps (PREP_TMA), else null.
  template <class E>
  static __device__ __forceinline__ void prep(const KDA2RecurrentArgs a, const PrepMaps* maps);
  // One (chunk c, value head hv, sequence n) of the prep; nothing for a chunk past the sequence's end.
  template <class E>
  static __device__ __forceinline__ void prep_item(const KDA2RecurrentArgs a, int c, int hv, int n, const PrepMaps* maps);
  // The end of a prep item: w (staged [token][LDS_KV]) and uᵀ (staged [channel][LDS_U]) to the slot, 16-byte pieces.
  template <class E>
  static __device__ __forceinline__ void copy_wu(uint8_t* slot, const E* sStW, const E* sStU, int tid) {
    E* gW = reinterpret_cast<E*>(slot + OFF_W);
    for (int p = tid; p < BT * K / 8; p += PREP_THREADS) {
      const int i = p / (K / 8), d = (p - i * (K / 8)) * 8;
      *reinterpret_cast<uint4*>(gW + swz<SWZ_W>(i, d, K)) = *reinterpret_cast<const uint4*>(sStW + i * LDS_KV + d);
    }
    uint4* gU = reinterpret_cast<uint4*>(slot + OFF_U);
    for (int p = tid; p < V * BT / 8; p += PREP_THREADS) {
      const int vv = p / (BT / 8), i = (p - vv * (BT / 8)) * 8;
      gU[p] = *reinterpret_cast<const uint4*>(sStU + vv * LDS_U + i);
    }
  }
  // PREP_BFS: the prep item's steps 5 and 6 — w and u by blocked substitution, staged and copied to the slot;
  // slot_sh: the shared word holding the slot's address (read after the last barrier).
  template <class E>
  static __device__ __forceinline__ void prep_wu_bfs(uint8_t* smem, uint8_t* const* slot_sh);
  // State pass: one CTA per (column slice, value head, sequence × segment); STATE_THREADS threads,
  // STATE_SMEM_BYTES of dynamic shared memory, grid (V / BLOCK_V, HV, N · split) for EMIT,
  // ((K + V) / BLOCK_V, HV, N · split) for FOLD.
  // E: the element type of o and of the workspace the prep wrote (so the FOLD pass has one entry per dtype too).
  template <class E, Pass PASS>
  static __device__ __forceinline__ void state(const KDA2RecurrentArgs& a);
  // Both passes on warpgroup MMAs (WG variants, sm_90a): one CTA per (BLOCK_V columns, value head, sequence ×
  // segment), a warpgroup per 64 of them; the FOLD pass's CTAs take the columns of [M | B].
  // OV: the overlapped launch (each slot waited for by its ready flag; unsplit EMIT only), a separate instantiation
  // so that the plain pass's code is what it was without the overlap (one body with a runtime test per chunk changed
  // its register allocation and made it 1-3 % slower: H200, bench/results/h200-2026-12-01-prep3/call7, call8).
  template <class E, Pass PASS, bool OV>
  static __device__ __forceinline__ void state_wg(const KDA2RecurrentArgs& a);
  template <class E, Pass PASS, bool OV>
  static __device__ __forceinline__ void state_mma_sync(const KDA2RecurrentArgs& a);
  // Split combine: per (COMBINE_COLS value columns, value head, sequence), the start state of every segment,
  // S_{s+1} = M_s S_s + B_s from S_0 = h0 (fp32 on CUDA cores: a few segments of K×K by K×COMBINE_COLS);
  // COMBINE_THREADS threads, grid (V / COMBINE_COLS, HV, N), static shared memory.
  static constexpr int COMBINE_THREADS = Cfg::COMBINE_THREADS, COMBINE_COLS = Cfg::COMBINE_COLS;
  static __device__ __forceinline__ void combine(const KDA2RecurrentArgs& a);
};

// =============================================================================================
// Prep: one CTA (8 warps) per (chunk, value head, sequence). Warp w works on sub-chunk I = w % 4, half w / 4.
// =============================================================================================
// 8 warps and, up to K = 128, two CTAs per SM (PREP_MIN_BLOCKS): the prep is latency-bound (shared-memory and
// SFU round trips), so it wants warps in flight more than registers.
template <class Cfg>
template <class E>
__device__ __forceinline__ void Kernels<Cfg>::prep(const KDA2RecurrentArgs a, const PrepMaps* maps) {
  // Plain launch: grid (chunks, HV, N), CTA (c, hv, n) makes that slot. Overlapped (the library launched the state
  // pass first and this grid, one CTA per item, as its programmatic dependent; docs/DESIGN.md §1): a CTA takes its
  // item from the work counter as it starts, so items go in chunk-major order whatever order the CTAs start in and
  // every chain's next chunk is made soon after its last; it sets the item's ready flag once the slot is written.
  // The CTA of the last item then waits for the state pass (griddepcontrol.wait), so this grid completes after
  // it: the stream's next work waits for this grid. Every other item is taken by then and needs no wait, so the
  // waiting CTA holds no slot another one needs. (A persistent loop over items made the prep spill: the compiler
  // kept loop-invariant values of the body live across it.)
  __shared__ int next_item;
  int c = blockIdx.x, hv = blockIdx.y, n = blockIdx.z;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Plain unsplit launch on sm_90: the state pass is this grid's programmatic dependent (library.cpp.j2): its CTAs
  // may take their SMs once every CTA here has started, and wait for this grid's completion (Kernels::state).
  if (!(a.flags & KDA2_CHUNK_OVERLAP)) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (a.flags & KDA2_CHUNK_OVERLAP) {
    if (threadIdx.x == 0) next_item = atomicAdd(ready_region(a), 1);
    __syncthreads();
    const int item = next_item, per = a.HV * a.N;
    c = item / per, n = item % per / a.HV, hv = item % a.HV;
    // at most PREP_LEAD chunks ahead of the chain's state pass: wait until it has reached chunk c − PREP_LEAD (a
    // state CTA marks a slot 2 as it starts reading it). No deadlock: every item of an earlier chunk was taken
    // before this one, and chunks below PREP_LEAD wait for nothing.
    if (c >= PREP_LEAD) {
      if (threadIdx.x == 0) {
        const SeqBounds sb = seq_bounds(a, n);
        if (static_cast<int64_t>(c) * BT < sb.len) {
          const int* f = ready_flag(a, sb.bos, n, c - PREP_LEAD, hv);
          int r;
          for (;;) {
            asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(r) : "l"(f) : "memory");
            if (r == 2) break;
            __nanosleep(128);
          }
        }
      }
      __syncthreads();
    }
  }
  prep_item<E>(a, c, hv, n, maps);
  // prep_item ends at a barrier, or returns at once on every thread for a chunk past its sequence: the slot's writes
  // are issued. Only thread 0 goes on, re-reading its item (nothing stays live across the body).
  if (!(a.flags & KDA2_CHUNK_OVERLAP) || threadIdx.x != 0) return;
  const int item = next_item, per = a.HV * a.N;
  const int ci = item / per, ni = item % per / a.HV, hi = item % a.HV;
  const SeqBounds sb = seq_bounds(a, ni);
  if (static_cast<int64_t>(ci) * BT < sb.len) {
    __threadfence();
    asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(ready_flag(a, sb.bos, ni, ci, hi)), "r"(1) : "memory");
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (item == (a.max_seqlen + BT - 1) / BT * per - 1) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class Cfg>
template <class E>
__device__ __forceinline__ void Kernels<Cfg>::prep_item(const KDA2RecurrentArgs a, int c, int hv, int n,
                                                        const PrepMaps* maps) {
  using X = Elem16<E>;
  using TC = Tc16<E>;   // the intermediates' element type and mma operand type: E (docs/DESIGN.md §1)
  // 128-byte aligned for the tensor copies' destinations (PREP_TMA; every tile offset is a multiple of 128 bytes)
  extern __shared__ __align__(128) uint8_t smem[];
  // q, k, v as read (E); after step 4, k 2^Γ (step 6's right-hand side beside v, also E) lies over q.
  E* sQ = reinterpret_cast<E*>(smem + P_Q);
  E* sK = reinterpret_cast<E*>(smem + P_K);
  E* sV = reinterpret_cast<E*>(smem + P_V);
  float* sG = reinterpret_cast<float*>(smem + P_G);
  float* sT = reinterpret_cast<float*>(smem + P_T);
  float* sB = reinterpret_cast<float*>(smem + P_B);

  const SeqBounds sb = seq_bounds(a, n);
  if (static_cast<int64_t>(c) * BT >= sb.len) return;
  const int rows = static_cast<int>(sb.len - static_cast<int64_t>(c) * BT < BT ? sb.len - static_cast<int64_t>(c) * BT : BT);
  const int64_t t0 = sb.bos + static_cast<int64_t>(c) * BT;
  // the query head of value head hv (HV / H value heads share one): unsigned, none for HV = H (the signed divisions
  // were ~70 SASS instructions a thread of the prologue, H200 ncu)
  const int HV = a.HV;
  const int h = HV == a.H ? hv : static_cast<int>(static_cast<unsigned>(hv) / (static_cast<unsigned>(HV) / a.H));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint8_t* slot = slot_ptr(a, sb.bos, n, c, hv);
  const float scale = a.scale;

  // ---- 1. one round trip to memory: the raw gate, q and k, v land in shared memory (cp.async, three commit
  //         groups in that order), β in a register; rows past the sequence are zero-filled. Each step waits only
  //         for the group it reads first: the gate activation and scan (2b) run while q, k and v land, the l2norm
  //         (2a, q and k rounded to the input dtype, like FLA) and step 3 while v does; step 4 reads v. (With one
  //         group and one wait, the wait for the tiles was 13 % of the prep's stall samples on P1, H200, ncu:
  //         experiments/2026-12-02-prep-latency/ANALYSIS.md.)
  const bool g_bf16 = (a.flags & KDA2_G_BF16) != 0;
  // The per-token β and the per-channel gate parameters are plain global loads: issued here, before the tiles'
  // cp.async, and read after the tiles land, so their latency hides behind the tiles' (measured on the H200, P3:
  // used right after issue, they were 3–4 % of the prep's stall samples, long-scoreboard).
  const int d_scan = tid & (K - 1);
  // β as loaded (16-bit: the input dtype's bits, else fp32 bits): converted after the wait, not at the load
  const bool beta16 = (a.flags & KDA2_BETA_BF16) != 0;
  uint32_t beta_bits = 0u;
  float a_log = 0.f, bias = 0.f;
  if (tid < rows) {
    const int64_t off = (t0 + tid) * HV + hv;
    beta_bits = beta16 ? static_cast<uint32_t>(static_cast<const uint16_t*>(a.beta)[off])
                       : static_cast<const uint32_t*>(a.beta)[off];
  }
  if (a.gate_mode != KDA2_GATE_PRECOMPUTED) {
    if (a.flags & KDA2_HAS_A_LOG) a_log = a.A_log[hv];
    if (a.flags & KDA2_HAS_DT_BIAS) bias = a.dt_bias[hv * K + d_scan];
  }
  // PREP_TMA: thread 0 issues one tensor copy per tile, each group completing on its own mbarrier (one phase: one
  // item per CTA); rows past the sequence arrive too (the next tokens, or zeros past the tensor) and are zeroed after
  // the wait (q and k by the l2norm, or by the loop after their wait without it; v by each thread's own pieces).
  __shared__ alignas(8) uint64_t tile_bar[3];   // the raw gate; q and k; v
  const uint32_t bars = smem_u32(tile_bar);
  if constexpr (PREP_TMA) {
    if (tid == 0) {
#pragma unroll
      for (int i = 0; i < 3; ++i) mbar_init(bars + 8 * i, 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");   // visible to the copy engine
      const int t = static_cast<int>(t0);   // token coordinates are int32 (the ABI's T)
      if (!g_bf16) {
        mbar_expect_tx(bars, BT * LDS_G * 4);
        tensor_load_3d(smem_u32(sG), &maps->g, 0, hv, t, bars);
      }
      mbar_expect_tx(bars + 8, 2 * BT * LDS_KV * 2);
      tensor_load_3d(smem_u32(sQ), &maps->q, 0, h, t, bars + 8);
      tensor_load_3d(smem_u32(sK), &maps->k, 0, h, t, bars + 8);
      mbar_expect_tx(bars + 16, BT * LDS_KV * 2);
      tensor_load_3d(smem_u32(sV), &maps->v, 0, hv, t, bars + 16);
    }
    if (g_bf16) load_gate_rows<K / 8>(a, sG, t0, hv, rows, tid);
    cp_async_commit();
    __syncthreads();   // the barriers are initialised before anyone waits on them
  } else {
    // Every copy's source is a row pointer set up once and stepped by a constant row stride, and the piece
    // counts are compile-time: the element offset recomputed per row in 64-bit and a runtime piece count (an
    // integer division per piece) cost ~19 instructions per cp.async, 9 % of the prep's instructions (H200, P3,
    // ncu).
    const int seg = tid & (KP - 1), r0 = tid >> KP_LOG2;
    const int64_t tok0 = t0 + r0;
    const E* q = static_cast<const E*>(a.q) + (tok0 * a.H + h) * K + seg * 8;
    const E* k = static_cast<const E*>(a.k) + (tok0 * a.H + h) * K + seg * 8;
    const E* v = static_cast<const E*>(a.v) + (tok0 * HV + hv) * V + seg * 8;
    const int64_t qk_step = static_cast<int64_t>(PREP_ROWS) * a.H * K, v_step = static_cast<int64_t>(PREP_ROWS) * HV * V;
    // raw gate rows (fp32: K/4 pieces, 16-bit in the input dtype: K/8 pieces) at the Γ tile's row pitch; zero past the end
    if (g_bf16) load_gate_rows<K / 8>(a, sG, t0, hv, rows, tid);
    else load_gate_rows<K / 4>(a, sG, t0, hv, rows, tid);
    cp_async_commit();
    const uint4 z = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int m = 0; m < BT / PREP_ROWS; ++m) {   // 16-B pieces of the 16-bit tiles
      const int r = r0 + PREP_ROWS * m;
      if (r < rows) {
        cp_async16(smem_u32(sQ + r * LDS_KV + seg * 8), q + m * qk_step);
        cp_async16(smem_u32(sK + r * LDS_KV + seg * 8), k + m * qk_step);
      } else {
        *reinterpret_cast<uint4*>(sQ + r * LDS_KV + seg * 8) = z;
        *reinterpret_cast<uint4*>(sK + r * LDS_KV + seg * 8) = z;
      }
    }
    cp_async_commit();
#pragma unroll
    for (int m = 0; m < BT / PREP_ROWS; ++m) {
      const int r = r0 + PREP_ROWS * m;
      if (r < rows) cp_async16(smem_u32(sV + r * LDS_KV + seg * 8), v + m * v_step);
      else *reinterpret_cast<uint4*>(sV + r * LDS_KV + seg * 8) = z;
    }
    cp_async_commit();
  }
  if constexpr (PREP_TMA) {
    // a tensor-copied gate is visible to each thread once it has seen the barrier's phase complete: no CTA barrier
    if (!g_bf16) {
      mbar_wait(bars, 0);
    } else {
      cp_async_wait<0>();
      __syncthreads();   // everyone's cp.async pieces
    }
  } else {
    cp_async_wait<2>();   // this thread's gate pieces
    __syncthreads();      // everyone's
  }
  // ---- 2b. gate activation and Γ = in-chunk cumulative sum (log2 units); β ----
  {
    // Thread (d, part) activates and scans rows SCAN_ROWS·part .. SCAN_ROWS·part + SCAN_ROWS − 1 of key
    // channel d in registers; the totals of the earlier parts reach it through shared memory (the T tile is
    // free until step 3). Measured on the H200 (P1, ncu): per-element mode tests, the bf16/fp32 select and a
    // second read-modify-write pass over the upper half made this step 21 % of the prep kernel's stall
    // samples; without them the prep kernel is 5–8 % faster (P1, P3, P5).
    const int d = d_scan, part = tid / K;
    const int mode = a.gate_mode;
    float x[SCAN_ROWS];
    if (g_bf16) {
#pragma unroll
      for (int e = 0; e < SCAN_ROWS; ++e)
        x[e] = X::to_f(reinterpret_cast<const E*>(sG + (SCAN_ROWS * part + e) * LDS_G)[d]);
    } else {
#pragma unroll
      for (int e = 0; e < SCAN_ROWS; ++e) x[e] = sG[(SCAN_ROWS * part + e) * LDS_G + d];
    }
    const float a_scale = (mode != KDA2_GATE_PRECOMPUTED && (a.flags & KDA2_HAS_A_LOG)) ? __expf(a_log) : 1.f;
    // the gate in log2 units, up to the factor `post` every row of the channel shares: the softplus gate's −exp(A_log)
    // multiplies the scanned sums (and the earlier parts' totals) once, at the store, not every element
    const float post = gate_rows_log2<HAS_SOFTPLUS, HAS_LOWER_BOUND>(x, mode, a_scale, bias, a.lower_bound);
    // rows past the sequence (zero-filled raw gates, whose activation is not zero) add nothing; a whole chunk,
    // every item but a sequence's last, skips the per-row test
    float acc = 0.f;
    if (rows == BT) {
#pragma unroll
      for (int e = 0; e < SCAN_ROWS; ++e) x[e] = acc += x[e];
    } else {
#pragma unroll
      for (int e = 0; e < SCAN_ROWS; ++e) {
        acc += SCAN_ROWS * part + e < rows ? x[e] : 0.f;
        x[e] = acc;
      }
    }
    float* sTot = sT;   // [SCAN_PARTS − 1][K]: each part's total but the last's
    static_assert((SCAN_PARTS - 1) * K <= BT * LDS_T, "the parts' totals fit in the T tile");
    if (part < SCAN_PARTS - 1) sTot[part * K + d] = acc;
    if (tid < BT) {
      float bi = beta16 ? X::lo(beta_bits) : __uint_as_float(beta_bits);
      if (tid < rows && (a.flags & KDA2_BETA_SIGMOID)) bi = sigmoid_stable(bi) * ((a.flags & KDA2_NEG_EIGVAL) ? 2.f : 1.f);
      sB[tid] = bi;
    }
    // The earlier parts' totals are visible: part 0 needs none, so it only arrives. (No CTA barrier: a thread's Γ
    // overwrites only the raw gates it read itself.)
    // (One asm with predicated forms: as an if / else the compiler duplicated the l2norm after it, ~300 instructions.)
    if constexpr (SCAN_PARTS > 1)
      asm volatile("{\n .reg .pred p;\n setp.eq.s32 p, %0, 0;\n @p bar.arrive %1, %2;\n @!p bar.sync %1, %2;\n}\n"
                   ::"r"(part), "n"(SCAN_BAR), "n"(PREP_THREADS) : "memory");
    float base = part > 0 ? sTot[d] : 0.f;
#pragma unroll
    for (int q = 1; q < SCAN_PARTS - 1; ++q)
      if (q < part) base += sTot[q * K + d];
    base *= post;
#pragma unroll
    for (int e = 0; e < SCAN_ROWS; ++e) sG[(SCAN_ROWS * part + e) * LDS_G + d] = fmaf(x[e], post, base);
  }
  // Tensor-copied q and k are visible to each thread after its own wait, so the l2norm starts there and writes the
  // zeros of rows past the sequence itself: one CTA barrier after it (Γ complete, q and k final) instead of one before
  // and one after. The cp.async pieces come from other threads, so that form keeps the barrier before.
  const bool qk_norm = (a.flags & KDA2_QK_L2NORM) != 0;
  if constexpr (PREP_TMA) {
    mbar_wait(bars + 8, 0);
    if (!qk_norm) {
      for (int p = tid; p < (BT - rows) * KP; p += PREP_THREADS) {   // rows past the sequence (its last chunk only)
        const int r = rows + p / KP, d = p % KP * 8;
        *reinterpret_cast<uint4*>(sQ + r * LDS_KV + d) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(sK + r * LDS_KV + d) = make_uint4(0, 0, 0, 0);
      }
    }
  } else {
    cp_async_wait<1>();   // this thread's q and k pieces
    __syncthreads();      // everyone's
  }
  // ---- 2a. l2norm of q, k in place ----
  {
    if (qk_norm) {
      __syncwarp();   // converged for the shuffles (after the predicated scan barrier, ptxas duplicated the loop)
      // From K = 128 a thread takes two 16-byte pieces of a row, pieces s and s + LPR: a row's sum needs log2(LPR)
      // shuffles instead of log2(KP), over half as many rows per thread. (At K = 64 a row is 8 pieces: 4 lanes per row
      // would put two rows in one quarter-warp's 16-byte accesses, bank conflicts at LDS_KV = 72.)
      constexpr int PPT = KP >= 16 ? 2 : 1, LPR = KP / PPT, RPP = PREP_THREADS / LPR;
      static_assert(LPR >= 8 && BT % RPP == 0, "a quarter-warp's 16-byte accesses stay inside one row");
      const int seg = tid & (LPR - 1);
      // two rows per pass: four independent shuffle trees in flight (one per pass left the shuffle latency
      // exposed, 11 % of the prep's stall samples on P3)
#pragma unroll 2
      for (int m = 0; m < BT / RPP; ++m) {
        const int r = tid / LPR + RPP * m;
#pragma unroll
        for (int which = 0; which < 2; ++which) {
          E* row = (which ? sK : sQ) + r * LDS_KV + seg * 8;
          uint4 x4[PPT];
          float ss = 0.f;
#pragma unroll
          for (int pp = 0; pp < PPT; ++pp) {
            x4[pp] = *reinterpret_cast<const uint4*>(row + pp * LPR * 8);
            const uint32_t* xw = reinterpret_cast<const uint32_t*>(&x4[pp]);
#pragma unroll
            for (int e = 0; e < 4; ++e) { const float2 f = X::unpack(xw[e]); ss += f.x * f.x + f.y * f.y; }
          }
#pragma unroll
          for (int o = LPR / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);  // LPR lanes hold a row
          const float rn = rsqrtf(ss + 1e-6f);
          // a row past the sequence holds the next tokens (or zeros past the tensor): zeros, as the cp.async form fills
          const bool live = !PREP_TMA || r < rows;
#pragma unroll
          for (int pp = 0; pp < PPT; ++pp) {
            uint32_t* xw = reinterpret_cast<uint32_t*>(&x4[pp]);
#pragma unroll
            for (int e = 0; e < 4; ++e) { const float2 f = X::unpack(xw[e]); xw[e] = X::pack(f.x * rn, f.y * rn); }
            if (live) *reinterpret_cast<uint4*>(row + pp * LPR * 8) = x4[pp];
            else *reinterpret_cast<uint4*>(row + pp * LPR * 8) = make_uint4(0, 0, 0, 0);
          }
        }
      }
    }
  }
  __syncthreads();   // Γ complete; q and k final

  E* gAq = reinterpret_cast<E*>(slot + OFF_AQ);
  const int g8 = lane >> 2, t4 = lane & 3;
  // ---- 3. A and Aqk in 16×16 blocks on tensor cores; the warps (I, 0) and (I, 1) own rows 16I..16I+15 ----
  // and split K: warp (I, part) sums key channels K/2·part .. K/2·part + K/2 − 1 of every tile of those rows (the
  // left factors are the costly part, and both warps needed all of them when they split the columns).
  // Left factors x_i ⊙ 2^(Γi−Γr), anchor r = 16I (i ≥ r: ≤ 1). Off-diagonal columns j < r: right factors
  // k_j ⊙ 2^(Γr−Γj) (≤ 1), the 2I column tiles left of the diagonal. Diagonal block: its middle row m = r + 8
  // is the anchor, left factors x_i ⊙ 2^(Γi−Γm), right factors k_j / 2^(Γj−Γm) on column tiles c = 0, 1
  // (j = r + 8c + g8, one of the warp's own rows): each factor lies within 2^±(decay of half the block), finite
  // while both halves' decay in that channel, Γr − Γm and Γm − Γr+15, are ≤ DIAG_RANGE; channels beyond that
  // are left out of the mma and added exactly on CUDA cores. (Anchored at r, the bound was the whole block's
  // decay: with the lower-bound gate, ≤ 7.2 per token in log2, many channels of every block took the exact
  // path, and its warps held the others at the step's barrier; half a block stays below 58.) Measured on the
  // H200 (P1): the all-pairs CUDA-core diagonal was ≈39 % of the prep kernel's
  // instructions and most of its shared-memory bank conflicts; prep 0.98 → 0.80 ms on tensor cores. The
  // diagonal runs in tf32, not bf16: in bf16 the output error grew 7–13 % on eight fp64-checked cases
  // (4.71e-3 → 5.02e-3 on a strong-decay one, over the 5e-3 bar); in tf32 it is within 2 % of the
  // CUDA-core figure.
  {
    const int I = warp & 3, part = warp >> 2, r = 16 * I;
    // Balance: pair I has 2I off-diagonal column tiles, so pair 3 set the step's length (its barrier held the
    // other pairs' warps: 7–10 % of the prep's stall samples on P3). Pair 0 takes pair 3's first two, computing
    // the left factors of rows 48..63 for them; a pair's off-diagonal tiles are then nt_lo ≤ nt < nt_hi of rows
    // ro..ro + 15.
    constexpr int BORROW_ROW = 48;
    const int nt_lo = I == 3 ? 2 : 0, nt_hi = I == 0 ? 2 : 2 * I, ro = I == 0 ? BORROW_ROW : r;
    float accK[6][4], accQ[6][4], dK[2][4], dQ[2][4];   // off-diagonal tiles nt_lo ≤ nt < nt_hi; diagonal tiles c
#pragma unroll
    for (int e = 0; e < 4; ++e) {
#pragma unroll
      for (int c = 0; c < 2; ++c) dK[c][e] = dQ[c][e] = 0.f;
#pragma unroll
      for (int nt = 0; nt < 6; ++nt) accK[nt][e] = accQ[nt][e] = 0.f;
    }
    // Off-diagonal column tile: the right factors k_j ⊙ 2^(Γa − Γj) of rows j (this lane's column), channels d0, d0 + 1
    // and d0 + 8, d0 + 9, against the anchor row's Γ (ga0, ga1 at those channels), times the left factors aK, aQ.
    auto off_tile = [&](float (&accK_)[4], float (&accQ_)[4], const uint32_t (&aK_)[4], const uint32_t (&aQ_)[4], int j,
                        int d0, float2 ga0, float2 ga1) {
      uint32_t b[2];
#pragma unroll
      for (int hc = 0; hc < 2; ++hc) {
        const int d = d0 + 8 * hc;
        const float2 gj = *reinterpret_cast<const float2*>(sG + j * LDS_G + d);
        const float2 ga = hc ? ga1 : ga0;
        const float2 kk = X::unpack(*reinterpret_cast<const uint32_t*>(sK + j * LDS_KV + d));
        b[hc] = TC::pack(kk.x * ex2(ga.x - gj.x), kk.y * ex2(ga.y - gj.y));
      }
      TC::mma(accK_, aK_, b[0], b[1]);
      TC::mma(accQ_, aQ_, b[0], b[1]);
    };
    // a channel of this lane's left out of the mma (the exact path adds it). Not tracked at K = 64: there the flag's
    // register takes the prep past its 128-register cap (a 4-byte spill), and the exact path's scan is two ballots.
    constexpr bool TRACK_OUT = K > 64;
    bool any_out = !TRACK_OUT;
#pragma unroll 1
    for (int ks = K / 32 * part; ks < K / 32 * (part + 1); ++ks) {
      const int d0 = 16 * ks + 2 * t4;
      const float2 gr0 = *reinterpret_cast<const float2*>(sG + r * LDS_G + d0);
      const float2 gr1 = *reinterpret_cast<const float2*>(sG + r * LDS_G + d0 + 8);
      const float2 gm0 = *reinterpret_cast<const float2*>(sG + (r + 8) * LDS_G + d0);
      const float2 gm1 = *reinterpret_cast<const float2*>(sG + (r + 8) * LDS_G + d0 + 8);
      const float2 ge0 = *reinterpret_cast<const float2*>(sG + (r + 15) * LDS_G + d0);
      const float2 ge1 = *reinterpret_cast<const float2*>(sG + (r + 15) * LDS_G + d0 + 8);
      uint32_t aK[4], aQ[4];
#pragma unroll
      for (int hc = 0; hc < 2; ++hc) {    // cols d0, d0+8
        const int d = d0 + 8 * hc;
        const float2 gr = hc ? gr1 : gr0, gm = hc ? gm1 : gm0, ge = hc ? ge1 : ge0;
        // channels d, d + 1 on tensor cores: the half-block decays around the anchor within DIAG_RANGE
        const bool ok0 = fmaxf(gr.x - gm.x, gm.x - ge.x) <= DIAG_RANGE;
        const bool ok1 = fmaxf(gr.y - gm.y, gm.y - ge.y) <= DIAG_RANGE;
        if constexpr (TRACK_OUT) any_out |= !(ok0 && ok1);
        // the diagonal left factors' anchor: the middle row for a kept channel, the block's first row r for one left
        // out (its factors then are the off-diagonal ones, ≤ 1: finite, so only the right factors need the zero)
        const float2 gd = make_float2(ok0 ? gm.x : gr.x, ok1 ? gm.y : gr.y);
        // The off-diagonal left factors 2^(Γi−Γr) = 2^(Γi−Γd)·2^(Γd−Γr): the diagonal ones times a per-channel
        // factor ≤ 1 (exactly 1 for a channel left out, anchored at r), one ex2 per channel instead of one per row.
        const float c0 = ex2(gd.x - gr.x), c1 = ex2(gd.y - gr.y);
        float2 kx[2], qx[2], eD[2], kD[2];
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {      // rows g8, g8+8
          const int i = r + g8 + 8 * hr;
          const float2 gi = *reinterpret_cast<const float2*>(sG + i * LDS_G + d);
          const float m0 = ex2(gi.x - gd.x), m1 = ex2(gi.y - gd.y);   // diagonal anchor r + 8 (kept channels)
          const float e0 = m0 * c0, e1 = m1 * c1;
          const float2 kk = X::unpack(*reinterpret_cast<const uint32_t*>(sK + i * LDS_KV + d));
          const float2 qq = X::unpack(*reinterpret_cast<const uint32_t*>(sQ + i * LDS_KV + d));
          aK[hr + 2 * hc] = TC::pack(kk.x * e0, kk.y * e1);
          aQ[hr + 2 * hc] = TC::pack(qq.x * e0, qq.y * e1);
          kx[hr] = make_float2(kk.x * m0, kk.y * m1);
          qx[hr] = make_float2(qq.x * m0, qq.y * m1);
          eD[hr] = make_float2(m0, m1);
          kD[hr] = kk;
        }
        // diagonal tiles in tf32 (m16n8k8): k-slot t4 is channel d, slot t4 + 4 channel d + 1; column tile c's
        // right factor comes from row r + 8c + g8, the warp's row hr = c. For a kept channel every factor
        // 2^(Γi−Γr+8) lies in [2^-DIAG_RANGE, 2^DIAG_RANGE] (normal), so every operand is finite (16-bit inputs
        // times those; a discarded j > i product may overflow to ±inf, which tf32_operand keeps, as the cvt
        // does) and every divisor normal: the conversions and the reciprocal skip the checks for inf and
        // denormals, bit for bit cvt.rna and __fdividef. Measured on the H200 (P1, ncu): these lines executed
        // 9.6 % of the prep's instructions, most of them those checks. A channel left out contributes zero
        // right factors against finite left ones (anchored at r: its middle-row factors may be infinite).
        const uint32_t tK[4] = {tf32_operand(kx[0].x), tf32_operand(kx[1].x), tf32_operand(kx[0].y), tf32_operand(kx[1].y)};
        const uint32_t tQ[4] = {tf32_operand(qx[0].x), tf32_operand(qx[1].x), tf32_operand(qx[0].y), tf32_operand(qx[1].y)};
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const uint32_t bD0 = ok0 ? tf32_operand(kD[c].x * rcp_normal(eD[c].x)) : 0u;
          const uint32_t bD1 = ok1 ? tf32_operand(kD[c].y * rcp_normal(eD[c].y)) : 0u;
          mma_tf32(dK[c], tK, bD0, bD1);
          mma_tf32(dQ[c], tQ, bD0, bD1);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 6; ++nt)
        if (nt >= nt_lo && nt < 2 * I) off_tile(accK[nt], accQ[nt], aK, aQ, 8 * nt + g8, d0, gr0, gr1);
    }
    if (I == 0) {   // pair 0: column tiles 0, 1 of rows 48..63 (anchor 48), into its unused accK / accQ [0..1]
#pragma unroll 1
      for (int ks = K / 32 * part; ks < K / 32 * (part + 1); ++ks) {
        const int d0 = 16 * ks + 2 * t4;
        uint32_t aK[4], aQ[4];
#pragma unroll
        for (int hc = 0; hc < 2; ++hc) {
          const int d = d0 + 8 * hc;
          const float2 ga = *reinterpret_cast<const float2*>(sG + BORROW_ROW * LDS_G + d);
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            const int i = BORROW_ROW + g8 + 8 * hr;
            const float2 gi = *reinterpret_cast<const float2*>(sG + i * LDS_G + d);
            const float e0 = ex2(gi.x - ga.x), e1 = ex2(gi.y - ga.y);
            const float2 kk = X::unpack(*reinterpret_cast<const uint32_t*>(sK + i * LDS_KV + d));
            const float2 qq = X::unpack(*reinterpret_cast<const uint32_t*>(sQ + i * LDS_KV + d));
            aK[hr + 2 * hc] = TC::pack(kk.x * e0, kk.y * e1);
            aQ[hr + 2 * hc] = TC::pack(qq.x * e0, qq.y * e1);
          }
        }
        const float2 ga0 = *reinterpret_cast<const float2*>(sG + BORROW_ROW * LDS_G + d0);
        const float2 ga1 = *reinterpret_cast<const float2*>(sG + BORROW_ROW * LDS_G + d0 + 8);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) off_tile(accK[nt], accQ[nt], aK, aQ, 8 * nt + g8, d0, ga0, ga1);
      }
    }
    // The two halves of K meet in the A tile (each lane reads what the same lane of the partner wrote), both handing
    // over before one pair barrier: warp (I, 0) puts its Aqk partials at A's own positions, on and below the diagonal,
    // warp (I, 1) its A partials reflected through the tile's centre, (i, j) -> (BT-1-i, BT-1-j), which maps the strict
    // lower triangle onto the unused strict upper one (a pair of adjacent columns stays adjacent, swapped); then warp
    // (I, 0) finishes A there and warp (I, 1) finishes Aqk. A stays reflected: the inverse and the block levels read it
    // there. (With two pair barriers, part 0 handing over Aqk and part 1 finishing it before handing over A, part 0
    // left the exchange 2.2-2.5 K cycles after part 1, and the part-1 warps waited 2.8-3.6 K cycles of an item's 33 K
    // at the end of step 4: experiments/2026-12-03-stage, call 5.) No other pair touches a pair's tiles or their
    // reflections (pair 0's borrowed tiles, rows 48..63 columns 0..15, are not pair 3's).
    // Rows i0, i1 of the diagonal tiles, o0, o1 of the off-diagonal ones (pair 0: the borrowed rows).
    const int i0 = r + g8, i1 = r + g8 + 8, o0 = ro + g8, o1 = ro + g8 + 8;
    auto put = [&](int a0, int a1, int j, const float (&v)[4]) {
      *reinterpret_cast<float2*>(sT + a0 * LDS_T + j) = make_float2(v[0], v[1]);
      *reinterpret_cast<float2*>(sT + a1 * LDS_T + j) = make_float2(v[2], v[3]);
    };
    auto add = [&](int a0, int a1, int j, float (&v)[4]) {
      const float2 lo = *reinterpret_cast<const float2*>(sT + a0 * LDS_T + j);
      const float2 hi = *reinterpret_cast<const float2*>(sT + a1 * LDS_T + j);
      v[0] += lo.x; v[1] += lo.y; v[2] += hi.x; v[3] += hi.y;
    };
    auto put_r = [&](int a0, int a1, int j, const float (&v)[4]) {
      *reinterpret_cast<float2*>(sT + a_refl(a0, j + 1)) = make_float2(v[1], v[0]);
      *reinterpret_cast<float2*>(sT + a_refl(a1, j + 1)) = make_float2(v[3], v[2]);
    };
    auto add_r = [&](int a0, int a1, int j, float (&v)[4]) {
      const float2 lo = *reinterpret_cast<const float2*>(sT + a_refl(a0, j + 1));
      const float2 hi = *reinterpret_cast<const float2*>(sT + a_refl(a1, j + 1));
      v[0] += lo.y; v[1] += lo.x; v[2] += hi.y; v[3] += hi.x;
    };
    // the diagonal tiles element by element: Aqk's partials on and below the diagonal only (above it lies another
    // pair's reflected A), A's reflected strictly below it only (on and below it, reflected, lie another pair's Aqk)
    auto put_lo = [&](int jd, const float (&v)[4]) {
      if (jd <= i0) sT[i0 * LDS_T + jd] = v[0];
      if (jd + 1 <= i0) sT[i0 * LDS_T + jd + 1] = v[1];
      if (jd <= i1) sT[i1 * LDS_T + jd] = v[2];
      if (jd + 1 <= i1) sT[i1 * LDS_T + jd + 1] = v[3];
    };
    auto add_lo = [&](int jd, float (&v)[4]) {
      if (jd <= i0) v[0] += sT[i0 * LDS_T + jd];
      if (jd + 1 <= i0) v[1] += sT[i0 * LDS_T + jd + 1];
      if (jd <= i1) v[2] += sT[i1 * LDS_T + jd];
      if (jd + 1 <= i1) v[3] += sT[i1 * LDS_T + jd + 1];
    };
    auto put_rs = [&](int jd, const float (&v)[4]) {
      if (jd < i0) sT[a_refl(i0, jd)] = v[0];
      if (jd + 1 < i0) sT[a_refl(i0, jd + 1)] = v[1];
      if (jd < i1) sT[a_refl(i1, jd)] = v[2];
      if (jd + 1 < i1) sT[a_refl(i1, jd + 1)] = v[3];
    };
    auto add_rs = [&](int jd, float (&v)[4]) {
      if (jd < i0) v[0] += sT[a_refl(i0, jd)];
      if (jd + 1 < i0) v[1] += sT[a_refl(i0, jd + 1)];
      if (jd < i1) v[2] += sT[a_refl(i1, jd)];
      if (jd + 1 < i1) v[3] += sT[a_refl(i1, jd + 1)];
    };
    // Channels with more than DIAG_RANGE of decay in either half of the block (before or after its anchor row r + 8),
    // added to the diagonal tiles' full sums, left factor x = k (A) or q (Aqk). Most go back to tensor cores with an
    // anchor per quarter: rows r..r+7 against row r + 4 and rows r+8..r+15 against row r + 12 (the decay of 4 rows and
    // of 3 within DIAG_RANGE), the lower-left quarter (i ≥ r + 8 > j) against row r + 8, where both factors are ≤ 1
    // and no range applies. Three tf32 mmas per 8 channels, each with the other rows' left factors zero, so each adds
    // only its own quarter; a channel not selected has zero factors on both sides. What a quarter cannot hold either
    // is summed pairwise on CUDA cores (2^(Γi−Γj), j ≤ i). On the CUDA cores alone, every left-out channel cost each
    // lane 8 ex2 and products: at four times the benchmark's decay (A_log = log 4, 4 % of the channels left out) P1
    // took 0.78 ms against 0.66, at log 8 (37 %) 1.39 (experiments/2026-12-04-overlap, call 1).
    auto exact = [&](float (&acc)[2][4], const E* x) {
#pragma unroll 1
      for (int e = 0; e < K / 32; ++e) {
        const int dl = 32 * e + lane;
        const float g0 = sG[r * LDS_G + dl], g8 = sG[(r + 8) * LDS_G + dl], g15 = sG[(r + 15) * LDS_G + dl];
        const uint32_t out = __ballot_sync(0xffffffffu, !(fmaxf(g0 - g8, g8 - g15) <= DIAG_RANGE));
        if (!out) continue;
        const float g4 = sG[(r + 4) * LDS_G + dl], g7 = sG[(r + 7) * LDS_G + dl], g12 = sG[(r + 12) * LDS_G + dl];
        const uint32_t quarter = out & __ballot_sync(0xffffffffu, fmaxf(fmaxf(g0 - g4, g4 - g7), fmaxf(g8 - g12, g12 - g15)) <= DIAG_RANGE);
#pragma unroll 1
        for (int ks = 0; ks < 4; ++ks) {
          if (!((quarter >> (8 * ks)) & 0xffu)) continue;
          // this lane's channels d, d + 1 (k-slots t4, t4 + 4), rows i0, i1; its B column is row i0 (c = 0) or i1 (c = 1)
          const int c0 = 8 * ks + 2 * t4, d = 32 * e + c0;
          const bool s0 = (quarter >> c0) & 1u, s1 = (quarter >> (c0 + 1)) & 1u;
          const float2 a4 = *reinterpret_cast<const float2*>(sG + (r + 4) * LDS_G + d);
          const float2 a8 = *reinterpret_cast<const float2*>(sG + (r + 8) * LDS_G + d);
          const float2 a12 = *reinterpret_cast<const float2*>(sG + (r + 12) * LDS_G + d);
          const float2 gt = *reinterpret_cast<const float2*>(sG + i0 * LDS_G + d);
          const float2 gb = *reinterpret_cast<const float2*>(sG + i1 * LDS_G + d);
          const float2 xt = X::unpack(*reinterpret_cast<const uint32_t*>(x + i0 * LDS_KV + d));
          const float2 xb = X::unpack(*reinterpret_cast<const uint32_t*>(x + i1 * LDS_KV + d));
          const float2 kt = X::unpack(*reinterpret_cast<const uint32_t*>(sK + i0 * LDS_KV + d));
          const float2 kb = X::unpack(*reinterpret_cast<const uint32_t*>(sK + i1 * LDS_KV + d));
          const uint32_t aTL[4] = {tf32_operand(s0 ? xt.x * ex2(gt.x - a4.x) : 0.f), 0u,
                                   tf32_operand(s1 ? xt.y * ex2(gt.y - a4.y) : 0.f), 0u};
          const uint32_t aBL[4] = {0u, tf32_operand(s0 ? xb.x * ex2(gb.x - a8.x) : 0.f),
                                   0u, tf32_operand(s1 ? xb.y * ex2(gb.y - a8.y) : 0.f)};
          const uint32_t aBR[4] = {0u, tf32_operand(s0 ? xb.x * ex2(gb.x - a12.x) : 0.f),
                                   0u, tf32_operand(s1 ? xb.y * ex2(gb.y - a12.y) : 0.f)};
          mma_tf32(acc[0], aTL, tf32_operand(s0 ? kt.x * ex2(a4.x - gt.x) : 0.f), tf32_operand(s1 ? kt.y * ex2(a4.y - gt.y) : 0.f));
          mma_tf32(acc[0], aBL, tf32_operand(s0 ? kt.x * ex2(a8.x - gt.x) : 0.f), tf32_operand(s1 ? kt.y * ex2(a8.y - gt.y) : 0.f));
          mma_tf32(acc[1], aBR, tf32_operand(s0 ? kb.x * ex2(a12.x - gb.x) : 0.f), tf32_operand(s1 ? kb.y * ex2(a12.y - gb.y) : 0.f));
        }
        uint32_t pairwise = out & ~quarter;
        while (pairwise) {
          const int d = 32 * e + __ffs(pairwise) - 1;
          pairwise &= pairwise - 1;
#pragma unroll
          for (int c = 0; c < 2; ++c)
#pragma unroll
            for (int y = 0; y < 4; ++y) {
              const int i = y < 2 ? i0 : i1, j = r + 8 * c + 2 * t4 + (y & 1);
              if (j <= i) {
                const float kj = X::to_f(sK[j * LDS_KV + d]) * ex2(sG[i * LDS_G + d] - sG[j * LDS_G + d]);
                acc[c][y] = fmaf(X::to_f(x[i * LDS_KV + d]), kj, acc[c][y]);
              }
            }
        }
      }
    };
    if (part == 0) {
#pragma unroll
      for (int nt = 0; nt < 6; ++nt)
        if (nt >= nt_lo && nt < nt_hi) put(o0, o1, 8 * nt + 2 * t4, accQ[nt]);
#pragma unroll
      for (int c = 0; c < 2; ++c) put_lo(r + 8 * c + 2 * t4, dQ[c]);
    } else {
#pragma unroll
      for (int nt = 0; nt < 6; ++nt)
        if (nt >= nt_lo && nt < nt_hi) put_r(o0, o1, 8 * nt + 2 * t4, accK[nt]);
#pragma unroll
      for (int c = 0; c < 2; ++c) put_rs(r + 8 * c + 2 * t4, dK[c]);
    }
    bool pair_out = true;
    if constexpr (TRACK_OUT) pair_out = prep_pair_sync_or(I, any_out); else prep_pair_sync(I);
    if (part == 1) {
#pragma unroll
      for (int nt = 0; nt < 6; ++nt) {
        if (nt >= nt_lo && nt < nt_hi) {
          const int j = 8 * nt + 2 * t4;
          add(o0, o1, j, accQ[nt]);
          *reinterpret_cast<uint32_t*>(gAq + swz<SWZ_AQK>(o0, j, BT)) = TC::pack(scale * accQ[nt][0], scale * accQ[nt][1]);
          *reinterpret_cast<uint32_t*>(gAq + swz<SWZ_AQK>(o1, j, BT)) = TC::pack(scale * accQ[nt][2], scale * accQ[nt][3]);
        }
      }
#pragma unroll
      for (int c = 0; c < 2; ++c) add_lo(r + 8 * c + 2 * t4, dQ[c]);
      // the Aqk partials are read: pair 1's inverse may write T_II over them (DIAG_INV_BAR)
      if (I != 1) asm volatile("bar.arrive %0, %1;\n" ::"n"(DIAG_INV_BAR), "n"(DIAG_INV_THREADS) : "memory");
    } else {
      const float ob_lo = sB[o0], ob_hi = sB[o1];
#pragma unroll
      for (int nt = 0; nt < 6; ++nt) {
        if (nt >= nt_lo && nt < nt_hi) {
          const int j = 8 * nt + 2 * t4;
          add_r(o0, o1, j, accK[nt]);
          // (PREP_BFS: K' itself, without β — the substitution's off-diagonal operand; β comes in with T_II)
          if constexpr (PREP_BFS) put_r(o0, o1, j, accK[nt]);
          else put_r(o0, o1, j, {ob_lo * accK[nt][0], ob_lo * accK[nt][1], ob_hi * accK[nt][2], ob_hi * accK[nt][3]});
        }
      }
#pragma unroll
      for (int c = 0; c < 2; ++c) add_rs(r + 8 * c + 2 * t4, dK[c]);
    }
    // the diagonal tiles this warp finishes (Aqk: part 1, A: part 0), through one copy of the exact path's code for
    // both parts: inlined once per part, it made the prep 288 SASS instructions longer (16 this way) and the short,
    // latency-bound grids up to 1.2 % slower (experiments/2026-12-04-overlap, call 2)
    float dd[2][4];
#pragma unroll
    for (int c = 0; c < 2; ++c)
#pragma unroll
      for (int y = 0; y < 4; ++y) dd[c][y] = part ? dQ[c][y] : dK[c][y];
    if (pair_out) exact(dd, part ? sQ : sK);
    if (part == 1) {
      // Aqk on and below the diagonal, zeros above it (selects, not products: the discarded j > i sums may be large)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int jd = r + 8 * c + 2 * t4;
        *reinterpret_cast<uint32_t*>(gAq + swz<SWZ_AQK>(i0, jd, BT)) =
            TC::pack(jd <= i0 ? scale * dd[c][0] : 0.f, jd + 1 <= i0 ? scale * dd[c][1] : 0.f);
        *reinterpret_cast<uint32_t*>(gAq + swz<SWZ_AQK>(i1, jd, BT)) =
            TC::pack(jd <= i1 ? scale * dd[c][2] : 0.f, jd + 1 <= i1 ? scale * dd[c][3] : 0.f);
      }
    } else {
      const float b_lo = sB[i0], b_hi = sB[i1];
      // diagonal tiles: A strictly below the diagonal is all the inverse reads
#pragma unroll
      for (int c = 0; c < 2; ++c)
        put_rs(r + 8 * c + 2 * t4, {b_lo * dd[c][0], b_lo * dd[c][1], b_hi * dd[c][2], b_hi * dd[c][3]});
      // A_II is final: pair 1 inverts it after its step 4 (DIAG_INV_BAR); the other pairs go on without waiting
      if (I != 1) asm volatile("bar.arrive %0, %1;\n" ::"n"(DIAG_INV_BAR), "n"(DIAG_INV_THREADS) : "memory");
    }
  }
  // zeros right of the diagonal blocks of Aqk
  for (int p = tid; p < 16 * 6 * 2; p += PREP_THREADS) {  // (row, 16-B chunk) right of the diagonal block
    const int rr = p / 12, ch = p - rr * 12;     // rr: row within a sub-chunk; 12 chunk-slots over I
    int I = 0, cc = ch;
    while (cc >= 2 * (3 - I)) { cc -= 2 * (3 - I); ++I; }
    *reinterpret_cast<uint4*>(gAq + swz<SWZ_AQK>(16 * I + rr, 16 * (I + 1) + 8 * cc, BT)) = make_uint4(0, 0, 0, 0);
  }
  if constexpr (PREP_TMA) {
    mbar_wait(bars + 16, 0);
    if (rows < BT) {   // rows past the sequence: this thread's pieces (step 6 reads them after the barriers)
#pragma unroll
      for (int m = 0; m < BT / PREP_ROWS; ++m) {
        const int r = (tid >> KP_LOG2) + PREP_ROWS * m;
        if (r >= rows) *reinterpret_cast<uint4*>(sV + r * LDS_KV + (tid & (KP - 1)) * 8) = make_uint4(0, 0, 0, 0);
      }
    }
  } else {
    cp_async_wait<0>();   // this thread's v pieces; everyone's are visible after the barrier that ends step 4
  }

  // ---- 4. element-wise outputs: qg, kg, 2^Γlast; step 6's right-hand side k 2^Γ (over q) -----------------
  //         β goes into T's columns instead (step 5: w = (T diag β)(k 2^Γ), u = (T diag β) v), so v is step 6's
  //         other right-hand side as it landed and this step neither reads nor rewrites it.
  //         Each warp starts as soon as its step 3 is done: step 4 reads q, k and Γ, final since step 2, writes the
  //         workspace, and keeps k 2^Γ in registers until the barrier, after which step 3 is done with q. (At a
  //         barrier before step 4, its entry was half of step 4's stall samples on P1, H200, ncu:
  //         experiments/2026-12-02-prep-latency/ANALYSIS.md.)
  {
    E* gQg = reinterpret_cast<E*>(slot + OFF_QG);
    E* gKg = reinterpret_cast<E*>(slot + OFF_KG);
    // Item m covers row tid / (K/8) + m · 256 / (K/8), channels 8·(tid % (K/8)) .. +7 (K/8 = KP, 256 / KP =
    // PREP_ROWS), the same channels for every m (so the last row of Γ is read once per thread, not once per item).
    static_assert(PREP_THREADS % (K / 8) == 0 && K / 8 == KP, "a thread's channels are the same in every item");
    const int d = (tid % (K / 8)) * 8;
    auto item_row = [&](int m) { return tid / (K / 8) + m * (PREP_THREADS / (K / 8)); };
    // Γ as two 16-byte reads per row (as float2 pairs, one per 8-byte read, 4-way bank conflicts: 34 % of the
    // prep's excess shared-memory wavefronts on P3, ncu)
    float2 glr[4];
    load_g8(sG + (BT - 1) * LDS_G + d, glr);
    constexpr int ITEMS = BT * (K / 8) / PREP_THREADS;
    uint4 kes[ITEMS];   // k 2^Γ of this thread's items, for the q tile after the barrier
#pragma unroll
    for (int m = 0; m < ITEMS; ++m) {  // 8 channels (16 B) per item
      const int i = item_row(m);
      uint4 qv = *reinterpret_cast<const uint4*>(sQ + i * LDS_KV + d);
      uint4 kv = *reinterpret_cast<const uint4*>(sK + i * LDS_KV + d);
      uint32_t* qw = reinterpret_cast<uint32_t*>(&qv);
      uint32_t* kw = reinterpret_cast<uint32_t*>(&kv);
      uint4 qg, kg;
      uint32_t* qgw = reinterpret_cast<uint32_t*>(&qg);
      uint32_t* kgw = reinterpret_cast<uint32_t*>(&kg);
      uint32_t* kew = reinterpret_cast<uint32_t*>(&kes[m]);
      float2 gir[4];
      load_g8(sG + i * LDS_G + d, gir);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 gi = gir[e], gl = glr[e];
        const float2 qf = X::unpack(qw[e]), kf = X::unpack(kw[e]);
        const float e0 = ex2(gi.x), e1 = ex2(gi.y);
        qgw[e] = TC::pack(scale * qf.x * e0, scale * qf.y * e1);
        kew[e] = TC::pack(kf.x * e0, kf.y * e1);
        kgw[e] = TC::pack(kf.x * ex2(gl.x - gi.x), kf.y * ex2(gl.y - gi.y));
      }
      *reinterpret_cast<uint4*>(gQg + swz<SWZ_QG>(i, d, K)) = qg;
      *reinterpret_cast<uint4*>(gKg + swz<SWZ_KG>(i, d, K)) = kg;
    }
    if (tid < K / 4) {
      float4 gl = *reinterpret_cast<const float4*>(sG + (BT - 1) * LDS_G + 4 * tid);
      gl = make_float4(ex2(gl.x), ex2(gl.y), ex2(gl.z), ex2(gl.w));
      *reinterpret_cast<float4*>(reinterpret_cast<float*>(slot + OFF_GL) + 4 * tid) = gl;
    }
    // The diagonal blocks' inverses T_II = (I + A_II)^-1 by forward substitution (fp32), in place over A_II (which
    // nothing else reads), by pair 1 (warps 1 and 5): its row block has the fewest off-diagonal tiles in step 3, so
    // the substitution runs in its slack while pairs 2 and 3 finish steps 3 and 4, not between two CTA barriers
    // with 2 of 8 warps working. Lanes 0..15 of warp 1 take block 0's columns, 16..31 block 1's, warp 5 blocks 2, 3.
    if (warp == 1 || warp == 5) {
      asm volatile("bar.sync %0, %1;\n" ::"n"(DIAG_INV_BAR), "n"(DIAG_INV_THREADS) : "memory");  // every A_II final
      const int r0 = 16 * (2 * (warp == 5) + (lane >> 4)), col = lane & 15;
      float Tc[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        float s0 = (i == col) ? 1.f : 0.f;
#pragma unroll
        for (int j = 0; j < i; ++j) s0 = fmaf(-sT[a_refl(r0 + i, r0 + j)], Tc[j], s0);
        Tc[i] = s0;
      }
      // both warps have read their A_II (reflected: block I's upper part holds block 3 − I's) before any T_II is written
      asm volatile("bar.sync %0, 64;\n" ::"n"(DIAG_PAIR_BAR) : "memory");
      if constexpr (PREP_BFS) {   // the substitution's diagonal operand: T_II diag β as tf32 bits (prep_wu_bfs)
        const float bc = sB[r0 + col];
#pragma unroll
        for (int i = 0; i < 16; ++i) sT[(r0 + i) * LDS_T + r0 + col] = __uint_as_float(tf32_operand(Tc[i] * bc));
      } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) sT[(r0 + i) * LDS_T + r0 + col] = Tc[i];
      }
    }
    __syncthreads();   // steps 3 and 4 done: A complete and its diagonal blocks inverted, q and k read for the last time
    // k 2^Γ over q; step 5 writes over k and Γ and reads A only, and its first barrier orders these stores before
    // step 6
#pragma unroll
    for (int m = 0; m < ITEMS; ++m) *reinterpret_cast<uint4*>(sQ + item_row(m) * LDS_KV + d) = kes[m];
  }
  if constexpr (PREP_BFS) {
    // the slot's address through shared memory: kept in registers across the substitution (which runs at the
    // register cap), one of its halves spilled
    __shared__ uint8_t* bfs_slot;
    if (tid == 0) bfs_slot = slot;
    prep_wu_bfs<E>(smem, &bfs_slot);
    return;
  }

  // ---- 5. T = (I + A)^-1, blockwise (k is no longer needed: T lives over it) ------------------------------
  // Diagonal 16-blocks by forward substitution (fp32; pair 1 did them at the end of step 4); then two levels by output
  // columns, so a warp's scratch Y stays its own: level 1 inverts the two 32-blocks, T_IJ = −T_II (A_IJ T_JJ) for
  // (I, J) = (1, 0), (3, 2); level 2 the lower-left 32-block, T21 = −T2 (A21 T1). The levels' products run on tf32 tensor cores (m16n8k8, fp32
  // accumulation): T is rounded to the input dtype for step 6 anyway, and tf32's 10 mantissa bits are bf16's 7 + 3,
  // fp16's 10 (the fp16 cases' errors moved most: states up to +1.1 %, still ~10× under the bar).
  // Removing the levels' fp32 CUDA-core FMAs had saved 10 % of P1 (H200, experiments/2026-12-02-prep-ablate): their
  // dense issue took the SM's other prep CTA's slots, which stall samples did not show. On tensor cores (H200, same
  // run, bench/results/h200-2026-12-02-prep-levels/call1): P1 0.790 / 0.792 → 0.742 / 0.743 ms, P3 0.769 → 0.722 /
  // 0.720, P4 0.823 / 0.825 → 0.776; fp64 errors within −0.1 … +0.3 % on o of the 29 Kimi accuracy cases (call 2).
  float* sTi = reinterpret_cast<float*>(sK);   // over k, on into Γ by T_OVER bytes (see P_SCR)
  float* sY = reinterpret_cast<float*>(smem + P_SCR) + warp * 32 * LDS_Y;  // Γ is dead: per-warp Y [32][8]
  // the m16n8k8 tf32 fragments of the levels' products: A rows r + g8 (+8) at columns k (+4) of an fp32 tile of row
  // stride ld (k includes the lane's t4); B rows k + t4 (+4) at column n
  auto afrag = [&](const float* x, int ld, int r, int k, uint32_t (&f)[4]) {
    f[0] = tf32_operand(x[(r + g8) * ld + k]);
    f[1] = tf32_operand(x[(r + g8 + 8) * ld + k]);
    f[2] = tf32_operand(x[(r + g8) * ld + k + 4]);
    f[3] = tf32_operand(x[(r + g8 + 8) * ld + k + 4]);
  };
  // the same A fragment of A itself, which lies reflected (a_refl)
  auto afrag_a = [&](int r, int k, uint32_t (&f)[4]) {
    f[0] = tf32_operand(sT[a_refl(r + g8, k)]);
    f[1] = tf32_operand(sT[a_refl(r + g8 + 8, k)]);
    f[2] = tf32_operand(sT[a_refl(r + g8, k + 4)]);
    f[3] = tf32_operand(sT[a_refl(r + g8 + 8, k + 4)]);
  };
  auto bmma = [&](float (&d)[4], const uint32_t (&f)[4], const float* x, int ld, int k, int n) {
    mma_tf32(d, f, tf32_operand(x[(k + t4) * ld + n]), tf32_operand(x[(k + t4 + 4) * ld + n]));
  };
  {  // level 1 on tensor cores (tf32 m16n8k8): warp w < 4 makes the 8 columns n0 .. of T_IJ, (I, J) = (2B + 1, 2B),
     // B = w / 2: Y = A_IJ T_JJ[:, n0..], staged in the warp's scratch, then T_IJ[:, n0..] = −T_II Y. T_II and T_JJ are
     // read where pair 1 left them, over A's diagonal blocks; meanwhile warps 4–7 copy those four blocks into T (two
     // 16-byte pieces a thread; a quarter-warp's rows 2 apart fill the 32 banks once at LDS_T = 72).
    if (warp < 4) {
      const int I = 2 * (warp >> 1) + 1, J = I - 1, n0 = 16 * J + 8 * (warp & 1);
      float y[4] = {0.f, 0.f, 0.f, 0.f}, z[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        uint32_t af[4];
        afrag_a(16 * I, 16 * J + 8 * s + t4, af);
        bmma(y, af, sT, LDS_T, 16 * J + 8 * s, n0 + g8);
      }
      *reinterpret_cast<float2*>(sY + g8 * LDS_Y + 2 * t4) = make_float2(y[0], y[1]);
      *reinterpret_cast<float2*>(sY + (g8 + 8) * LDS_Y + 2 * t4) = make_float2(y[2], y[3]);
      __syncwarp();
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        uint32_t af[4];
        afrag(sT, LDS_T, 16 * I, 16 * I + 8 * s + t4, af);
        bmma(z, af, sY, LDS_Y, 8 * s, g8);
      }
      *reinterpret_cast<float2*>(sTi + (16 * I + g8) * LDS_T + n0 + 2 * t4) = make_float2(-z[0], -z[1]);
      *reinterpret_cast<float2*>(sTi + (16 * I + g8 + 8) * LDS_T + n0 + 2 * t4) = make_float2(-z[2], -z[3]);
    } else {
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const int row = diag_copy_row(tid - 128, m), c4 = 4 * (tid & 3), b = 16 * (row >> 4);
        *reinterpret_cast<float4*>(sTi + row * LDS_T + b + c4) = *reinterpret_cast<const float4*>(sT + row * LDS_T + b + c4);
      }
    }
  }
  __syncthreads();   // T1 and T2 complete; the A tile's rows 32..63 are dead (level 2 reads A21, reflected, in rows 0..31)
  // T diag β as the 16-bit mma operand of step 6 (column j times β_j: step 6's right-hand sides are k 2^Γ and v, not
  // β k 2^Γ and β v — a 64 × 64 scaling instead of two 64 × K ones, and v used as it landed), row stride LDS_T16
  // (the TIR stage's), so that step 6's warps read any 16×16 block of it with one ldmatrix. It lies over the A
  // tile's dead rows 32..63, so it is written while level 2 runs: warps 4–7 copy the final blocks T1 and T2, level 2's warps
  // store their T21 columns in 16 bits straight from the accumulators (the same rounding: nothing reads T21 in fp32).
  E* sT16 = reinterpret_cast<E*>(smem + P_T + 32 * LDS_T * 4);
  static_assert(BT * LDS_T16 * 2 <= 32 * LDS_T * 4, "the 16-bit T lies over the A tile's rows 32..63");
  {  // level 2: warp w < 4 makes the 8 columns n0 = 8w .. of T21 (rows 32..63): Y = A21 T1[:, n0..] (T1's upper-right
     // block is zero and not stored: columns from 16 take k-steps over rows 16..31 only), then T21[:, n0..] = −T2 Y
     // (T2 block lower triangular: rows 32..47 take k over 32..47 only)
    if (warp < 4) {
      const int n0 = 8 * warp;
      float y[2][4], z[2][4];
#pragma unroll
      for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int e = 0; e < 4; ++e) y[m][e] = z[m][e] = 0.f;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          if (n0 >= 16 && s < 2) continue;
          uint32_t af[4];
          afrag_a(32 + 16 * m, 8 * s + t4, af);
          bmma(y[m], af, sTi, LDS_T, 8 * s, n0 + g8);
        }
        *reinterpret_cast<float2*>(sY + (16 * m + g8) * LDS_Y + 2 * t4) = make_float2(y[m][0], y[m][1]);
        *reinterpret_cast<float2*>(sY + (16 * m + g8 + 8) * LDS_Y + 2 * t4) = make_float2(y[m][2], y[m][3]);
      }
      __syncwarp();
#pragma unroll
      for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          if (s >= 2 * (m + 1)) continue;
          uint32_t af[4];
          afrag(sTi, LDS_T, 32 + 16 * m, 32 + 8 * s + t4, af);
          bmma(z[m], af, sY, LDS_Y, 8 * s, g8);
        }
        const int r = 32 + 16 * m + g8;
        const float2 b = *reinterpret_cast<const float2*>(sB + n0 + 2 * t4);
        *reinterpret_cast<uint32_t*>(sT16 + r * LDS_T16 + n0 + 2 * t4) = TC::pack(-z[m][0] * b.x, -z[m][1] * b.y);
        *reinterpret_cast<uint32_t*>(sT16 + (r + 8) * LDS_T16 + n0 + 2 * t4) = TC::pack(-z[m][2] * b.x, -z[m][3] * b.y);
      }
    } else {
      // T1 (rows 0..31, columns 0..31) and T2 (rows 32..63, columns 32..63): 4 columns per thread, 8 threads per row;
      // the two rows of a half-warp's store are 4 apart, so its 8-byte stores fill the 32 banks once (LDS_T16 = 72)
      const int q = (tid - 128) >> 3, j4 = 4 * (tid & 7);
      const int row = (q >> 1 & 3) + 4 * (q & 1) + 8 * (q >> 3);
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int i = row + 16 * m, j = j4 + (m >= 2 ? 32 : 0);
        const float4 t = *reinterpret_cast<const float4*>(sTi + i * LDS_T + j);
        const float4 b = *reinterpret_cast<const float4*>(sB + j);
        *reinterpret_cast<uint2*>(sT16 + i * LDS_T16 + j) =
            make_uint2(TC::pack(t.x * b.x, t.y * b.y), TC::pack(t.z * b.z, t.w * b.w));
      }
    }
  }
  __syncthreads();   // T16 complete before step 6 reads it

  // ---- 6. w = (T diag β)(k 2^Γ), u = (T diag β) v on tensor cores ---------------------------------------
  //         Row block I of the product sums k-steps 0..I (T is lower triangular): 1 + 2 + 3 + 4 = 10 block
  //         products per 16-column piece. A warp takes whole pieces for row blocks {3, 2, 1, 0} (K ≥ 128: K/128
  //         pieces each) or, with K/16 = 4 pieces for 8 warps, one piece for {3, 0} or {2, 1}: 10 or 5 block
  //         products per piece, the same on every warp. (A split by row block, warp (I, half) on block I, leaves
  //         block 0's warps idle for 3/4 of the step and holds the rest at its barrier; a T fragment packed from
  //         fp32 costs 8 instructions, one ldmatrix of T16 serves.)
  {
    constexpr int PIECES = K / 16, RBG = PIECES >= 8 ? 1 : 2;       // RBG: groups of row blocks
    constexpr int NRB = 4 / RBG, NPC = PIECES * RBG / 8;             // row blocks, pieces per warp
    static_assert(NPC >= 1 && PIECES * RBG == 8 * NPC, "pieces over the 8 warps");
    const int grp = RBG == 1 ? 0 : warp >> 2, np0 = NPC * (RBG == 1 ? warp : warp & 3);
    auto rb = [&](int j) { return RBG == 1 ? 3 - j : (j == 0 ? 3 - grp : grp); };   // rb(0) is the largest
    // ldmatrix lane addresses: .trans for a [k = token][n = channel] tile: matrices (k0,n0),(k0+8,n0),(k0,n0+8),
    // (k0+8,n0+8); plain for the [row][k] T16 block: (r0,k0),(r0+8,k0),(r0,k0+8),(r0+8,k0+8) — the same lane split
    const int lr = lane & 7, lm = lane >> 3;
    const int krow = lr + 8 * (lm & 1), ncol = 8 * (lm >> 1);
    // staging: w over k (dead since T16 holds T), uᵀ in Γ (dead), so both passes stage before one barrier
    E* sStW = sK;
    E* sStU = reinterpret_cast<E*>(smem + P_SCR);
    // unrolled: u's products may start while w's staging stores drain (same bits, P1–P5 0.2–0.5 % faster, K3 within
    // ±0.4 %: experiments/2026-12-03-stage, call 4)
#pragma unroll
    for (int which = 0; which < 2; ++which) {
      // step 4 left k 2^Γ over q; v is as it landed
      const E* src = reinterpret_cast<const E*>(which == 0 ? sQ : sV);
      float acc[NRB][2 * NPC][4];
#pragma unroll
      for (int j = 0; j < NRB; ++j)
#pragma unroll
        for (int nt = 0; nt < 2 * NPC; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][nt][e] = 0.f;
      // unrolled: each row block's k-step bound (ks <= rb(j)) is then known at compile time where rb does not depend
      // on the warp (K >= 128); same bits, P1-P3 and P5 0.3-1 % faster (experiments/2026-12-03-pipes, call 3)
#pragma unroll
      for (int ks = 0; ks <= rb(0); ++ks) {
        uint32_t aT[NRB][4];
#pragma unroll
        for (int j = 0; j < NRB; ++j)
          if (ks <= rb(j)) ldsm_x4(aT[j], smem_u32(sT16 + (16 * rb(j) + krow) * LDS_T16 + 16 * ks + ncol));
#pragma unroll
        for (int np = 0; np < NPC; ++np) {
          uint32_t b[4];
          ldsm_x4_t(b, smem_u32(src + (16 * ks + krow) * LDS_KV + 16 * (np0 + np) + ncol));
#pragma unroll
          for (int j = 0; j < NRB; ++j)
            if (ks <= rb(j)) {
              TC::mma(acc[j][2 * np], aT[j], b[0], b[1]);
              TC::mma(acc[j][2 * np + 1], aT[j], b[2], b[3]);
            }
        }
      }
      // stage as E: w row-major [64][LDS_KV], uᵀ [V][LDS_U]; then 16-B coalesced stores. On sm_90 a stmatrix stores a
      // 16×16 block's four 8×8 quarters (.trans for uᵀ: a quarter's token rows become value rows), lane 8m + rr
      // addressing row rr of quarter m (tokens + 8 (m % 2), columns + 8 (m / 2)); per element the transposed 2-byte
      // stores and their conversions had been ~3 instructions.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#pragma unroll
      for (int j = 0; j < NRB; ++j)
#pragma unroll
        for (int np = 0; np < NPC; ++np) {
          const uint32_t r4[4] = {TC::pack(acc[j][2 * np][0], acc[j][2 * np][1]), TC::pack(acc[j][2 * np][2], acc[j][2 * np][3]),
                                  TC::pack(acc[j][2 * np + 1][0], acc[j][2 * np + 1][1]),
                                  TC::pack(acc[j][2 * np + 1][2], acc[j][2 * np + 1][3])};
          const int tb = 16 * rb(j) + 8 * (lm & 1), nb = 16 * (np0 + np) + 8 * (lm >> 1);
          if (which == 0) stsm_x4(r4, smem_u32(sStW + (tb + lr) * LDS_KV + nb));
          else stsm_x4_t(r4, smem_u32(sStU + (nb + lr) * LDS_U + tb));
        }
#else
#pragma unroll
      for (int j = 0; j < NRB; ++j)
#pragma unroll
        for (int nt = 0; nt < 2 * NPC; ++nt) {
          const int col = 16 * np0 + 8 * nt + 2 * t4, i0 = 16 * rb(j) + g8, i1 = i0 + 8;
          if (which == 0) {
            *reinterpret_cast<uint32_t*>(sStW + i0 * LDS_KV + col) = TC::pack(acc[j][nt][0], acc[j][nt][1]);
            *reinterpret_cast<uint32_t*>(sStW + i1 * LDS_KV + col) = TC::pack(acc[j][nt][2], acc[j][nt][3]);
          } else {
            sStU[col * LDS_U + i0] = TC::from_f(acc[j][nt][0]);
            sStU[(col + 1) * LDS_U + i0] = TC::from_f(acc[j][nt][1]);
            sStU[col * LDS_U + i1] = TC::from_f(acc[j][nt][2]);
            sStU[(col + 1) * LDS_U + i1] = TC::from_f(acc[j][nt][3]);
          }
        }
#endif
    }
    __syncthreads();   // both stagings complete
    copy_wu(slot, sStW, sStU, tid);
  }
}

// PREP_BFS: steps 5 and 6 as a blocked forward substitution (docs/DESIGN.md §1; the rounding order of
// kda2/reference/rounding.py bfs_chunk, checked on its own by tests/kernels/bfs_check.cu). With K' = the off-diagonal
// sums step 3 left (reflected, fp32, without β) and T_II the diagonal inverses pair 1 left, per sub-chunk I:
//   R_I = X_I − Σ_{J<I} K'_IJ Y_J    Y_I = (T_II diag β_I) R_I,   X = k 2^Γ (over q) for w, v for u
// transposed, so that the channels are the MMA's M: warpgroup 0 solves w, warpgroup 1 u, each thread holding its
// warp's 16 rows of every 64-channel tile. The K' products are register-A wgmma m64n16k16 (A = Y_Jᵀ, the earlier
// stages' results packed to 16 bits in registers; B = the K'_IJ panel, subtracted), the diagonal one tf32 mma.sync fed from the
// same accumulators (kda2/bfs.cuh tf32_afrag_from_acc): T diag β is never rounded to 16 bits as a whole, which makes
// this order the more accurate one (experiments/2026-12-05-prep-numerics: o error 3 % lower on average).
template <class Cfg>
template <class E>
__device__ __forceinline__ void Kernels<Cfg>::prep_wu_bfs(uint8_t* smem, uint8_t* const* slot_sh) {
  using TC = Tc16<E>;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, lr = lane & 7, lm = lane >> 3;
  const float* sT = reinterpret_cast<const float*>(smem + P_T);
  const uint32_t panels = (smem_u32(smem + P_G) + 1023u) & ~1023u;   // the wgmma's swizzle atoms: 1024-byte aligned
  E* sP = reinterpret_cast<E*>(smem + (panels - smem_u32(smem)));
  // K'_IJ (J < I) into the panels, a 16-byte piece (8 k) a thread: threads 0..191 take rows 16..31 (2 pieces each),
  // 32..47 (4), 48..63 (6); the reflected A tile holds a piece's 8 values reversed and contiguous (a_refl). Threads
  // 192..223 write the identity.
  if (tid < 192) {
    int row, c;
    if (tid < 32) {
      row = 16 + (tid >> 1), c = tid & 1;
    } else if (tid < 96) {
      row = 32 + ((tid - 32) >> 2), c = (tid - 32) & 3;
    } else {
      const int q = tid - 96, r6 = q / 6;
      row = 48 + r6, c = q - 6 * r6;
    }
    const float4 hi = *reinterpret_cast<const float4*>(sT + a_refl(row, 8 * c + 7));   // k 8c+7 .. 8c+4
    const float4 lo = *reinterpret_cast<const float4*>(sT + a_refl(row, 8 * c + 3));   // k 8c+3 .. 8c
    *reinterpret_cast<uint4*>(sP + ((row >> 4) - 1) * BFS_PANEL_ELEMS + panel128_offset(row & 15, 8 * c, 16)) =
        make_uint4(TC::pack(lo.w, lo.z), TC::pack(lo.y, lo.x), TC::pack(hi.w, hi.z), TC::pack(hi.y, hi.x));
  } else if (tid < 224) {
    bfs_identity_piece(sP, tid - 192);
  }
  fence_proxy_async();   // ordinary stores, read by the async proxy
  __syncthreads();       // the panels, and k 2^Γ over q, complete

  static_assert(K == V && K % 64 == 0, "whole 64-channel tiles per warpgroup");
  const int wg = warp >> 2;
  E* sStW = reinterpret_cast<E*>(smem + P_K);       // w [token][LDS_KV] over k (dead since step 4)
  E* sStU = reinterpret_cast<E*>(smem + P_BFS_U);   // uᵀ [channel][LDS_U] in Γ after the panels
  const int chw = 16 * (warp & 3);
  // warpgroup 0: w from k 2^Γ (over q), staged transposed to [token][channel] by stmatrix.trans; warpgroup 1: u from v,
  // staged as uᵀ [channel][token]; lane 8m + rr addresses row rr of matrix m
  bfs_solve<E, K / 64>(reinterpret_cast<const E*>(smem + (wg ? P_V : P_Q)), LDS_KV, panels,
                       reinterpret_cast<const uint32_t*>(sT), LDS_T, 16, [&](int I, int mt, const uint32_t (&r4)[4]) {
    const int chb = 64 * mt + chw;
    if (wg == 0) stsm_x4_t(r4, smem_u32(sStW + (16 * I + 8 * (lm >> 1) + lr) * LDS_KV + chb + 8 * (lm & 1)));
    else stsm_x4(r4, smem_u32(sStU + (chb + 8 * (lm & 1) + lr) * LDS_U + 16 * I + 8 * (lm >> 1)));
  });
  __syncthreads();   // both stagings complete (and the slot's address, written long before)
  copy_wu(*slot_sh, sStW, sStU, tid);
}

// =============================================================================================
// State pass: one CTA per (value slice, value head, sequence). Warps come in pairs: pair p owns value
// columns v0 + 16p .. v0 + 16p + 15, and warp h of the pair holds key channels 64h .. 64h + 63 of that
// slice of Sᵀ ([16 v][64 k] fp32) in mma accumulators (see pair_sync for why pairs split K).
// =============================================================================================
template <class Cfg>
template <class E, Pass PASS>
__device__ __forceinline__ void Kernels<Cfg>::state(const KDA2RecurrentArgs& a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Overlapped (docs/DESIGN.md §1): the prep grid is this grid's programmatic dependent; it may start once every
  // CTA here has signalled, and each state CTA waits for the slots it reads by their ready flags.
  if constexpr (PASS == Pass::EMIT)
    if (a.flags & KDA2_CHUNK_OVERLAP) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if constexpr (PASS == Pass::FOLD) {   // never overlapped (the library overlaps unsplit launches only)
    if constexpr (WG) state_wg<E, PASS, false>(a); else state_mma_sync<E, PASS, false>(a);
  } else if (a.flags & KDA2_CHUNK_OVERLAP) {
    if constexpr (WG) state_wg<E, PASS, true>(a); else state_mma_sync<E, PASS, true>(a);
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // launched as the prep's programmatic dependent (plain unsplit launches): nothing is read before the prep's
    // writes are visible; launched plainly, this returns at once
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    if constexpr (WG) state_wg<E, PASS, false>(a); else state_mma_sync<E, PASS, false>(a);
  }
}

template <class Cfg>
template <class E, Pass PASS, bool OV>
__device__ __forceinline__ void Kernels<Cfg>::state_mma_sync(const KDA2RecurrentArgs& a) {
  constexpr bool FOLD = PASS == Pass::FOLD;
  using TC = Tc16<E>;   // the workspace's element type and the mma operand type: E (docs/DESIGN.md §1)
  extern __shared__ __align__(128) uint8_t smem[];   // (as the prep declares it)
  const int split = a.split > 1 ? a.split : 1;
  const int hv = blockIdx.y, n = blockIdx.z / split, seg = blockIdx.z - n * split;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int pair = warp >> 1, kh = warp & 1;
  // FOLD: columns 0 .. K-1 of [M | B] are M (u = 0, start I), columns K .. K+V-1 are B (value columns).
  const int col0 = blockIdx.x * BLOCK_V;
  const bool m_cols = FOLD && col0 < K;
  const int vc = FOLD && !m_cols ? col0 - K : col0;   // first value (or M) column of the CTA
  const int vw = vc + 16 * pair;                // first value column of this pair
  const int kb = KH * kh;                       // first key channel of this warp
  const int om = 4 * kh;                        // this warp finishes o for tokens 8·om .. 8·om + 31
  const SeqBounds sb = seq_bounds(a, n);
  const int64_t nch = (sb.len + BT - 1) / BT;
  const Segment sg = segment_of(nch, split, seg);
  if (FOLD ? seg >= sg.last : (sg.c0 >= sg.c1 && seg != sg.last)) return;  // uniform over the CTA
  const int HV = a.HV;
  const int64_t srow = (static_cast<int64_t>(n) * HV + hv) * K * V;
  const int64_t zrow = (static_cast<int64_t>(n) * split + seg) * HV + hv;   // this segment's split-region row
  uint8_t* const wsb = static_cast<uint8_t*>(a.workspace);

  // Sᵀ fragment: S[nt][0..1] = Sᵀ[vw+g8][kb+8nt+2t4 .. +1], S[nt][2..3] = Sᵀ[vw+g8+8][same]
  float S[KH / 8][4];
  // The start state: h0 (segment 0), the combine's start state (key-first, later segments), I | 0 (FOLD).
  const float* start = FOLD ? nullptr
                     : seg > 0 ? reinterpret_cast<const float*>(wsb + kda2_split_start_offset(&a, K, V)) + zrow * K * V
                     : a.h0 ? a.h0 + srow : nullptr;
  if (FOLD && m_cols) {
#pragma unroll
    for (int nt = 0; nt < KH / 8; ++nt) {
      const int d = kb + 8 * nt + 2 * t4;
      S[nt][0] = vw + g8 == d ? 1.f : 0.f;
      S[nt][1] = vw + g8 == d + 1 ? 1.f : 0.f;
      S[nt][2] = vw + g8 + 8 == d ? 1.f : 0.f;
      S[nt][3] = vw + g8 + 8 == d + 1 ? 1.f : 0.f;
    }
  } else if (start) {
    const float* h0 = start;
#pragma unroll
    for (int nt = 0; nt < KH / 8; ++nt) {
      const int d = kb + 8 * nt + 2 * t4;
      if (V_FIRST && seg == 0) {
        const float2 lo = *reinterpret_cast<const float2*>(h0 + (vw + g8) * K + d);
        const float2 hi = *reinterpret_cast<const float2*>(h0 + (vw + g8 + 8) * K + d);
        S[nt][0] = lo.x; S[nt][1] = lo.y; S[nt][2] = hi.x; S[nt][3] = hi.y;
      } else {
        S[nt][0] = h0[d * V + vw + g8];
        S[nt][1] = h0[(d + 1) * V + vw + g8];
        S[nt][2] = h0[d * V + vw + g8 + 8];
        S[nt][3] = h0[(d + 1) * V + vw + g8 + 8];
      }
    }
  } else {
#pragma unroll
    for (int nt = 0; nt < KH / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[nt][e] = 0.f;
  }

  // Loop trip counts are compile-time and strides multiples of 16 pieces, so every cp.async below is
  // one instruction with an immediate offset from a per-thread base.
  static_assert((BLOCK_V * BT / 8) % STATE_THREADS == 0 && STATE_THREADS % 16 == 0, "load tiling");
  const int64_t nlocal = FOLD || sg.c1 > sg.c0 ? sg.c1 - sg.c0 : 0;
  auto load_chunk = [&](int64_t cc, int stage) {
    if constexpr (OV) wait_ready(a, sb.bos, n, cc, hv);
    const uint8_t* slot = slot_ptr(a, sb.bos, n, cc, hv);
    const uint32_t st = smem_u32(smem + stage * S_STAGE);
    if constexpr (BULK) {
      if (tid == 0) bulk_tiles(st, smem_u32(smem + S_MB + 16 * stage), slot);
    } else {  // sm_80: the same bytes by cp.async, 16-byte pieces at the same offsets
      constexpr int P1 = 3 * BT * K / 8, P2 = (BT * BT * 2 + K * 4) / 16;
      static_assert(P1 % STATE_THREADS == 0, "w|qg|kg pieces per thread");
#pragma unroll
      for (int m = 0; m < P1 / STATE_THREADS; ++m)
        cp_async16(st + S_W + (tid + m * STATE_THREADS) * 16, slot + OFF_W + (tid + m * STATE_THREADS) * 16);
      for (int p = tid; p < P2; p += STATE_THREADS) cp_async16(st + S_AQ + p * 16, slot + OFF_AQ + p * 16);
    }
    if (!m_cols) load_ut(st + S_U, slot, vc, tid);  // the M columns have u = 0
  };

  // Partial sums to the partner: fragment-ordered float4 per lane (conflict-free both ways).
  float4* xMine = reinterpret_cast<float4*>(smem + S_X) + warp * XCH_F4 * 32;
  const float4* xPeer = reinterpret_cast<const float4*>(smem + S_X) + (warp ^ 1) * XCH_F4 * 32;
  E* sO = reinterpret_cast<E*>(smem + S_O) + warp * (BT / 2) * LDS_O;
  E* o = static_cast<E*>(a.o);
  const int lr = lane & 7, lm = lane >> 3;
  // ldmatrix (non-trans) lane address for a [n][k] tile: matrices (n0,k0),(n0,k0+8),(n0+8,k0),(n0+8,k0+8)
  const int nrow = lr + 8 * (lm >> 1), kcol = 8 * (lm & 1);
  // ldmatrix.trans lane address for a [k][n] tile: matrices (k0,n0),(k0+8,n0),(k0,n0+8),(k0+8,n0+8)
  const int krow = lr + 8 * (lm & 1), ncol = 8 * (lm >> 1);

  // STAGES-deep pipeline: chunk cc + STAGES − 1 is requested while chunk cc computes. One cp.async
  // commit group per chunk slot (empty past the end) keeps the wait_group count uniform; on sm_90 each
  // stage's mbarrier also says when its bulk copies have landed (phase parity = use count of the stage).
  if constexpr (BULK) {
    if (tid == 0) {
#pragma unroll
      for (int s0 = 0; s0 < STAGES; ++s0) mbar_init(smem_u32(smem + S_MB + 16 * s0), 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the copy engine
    }
    __syncthreads();  // the barriers are initialised before anyone waits on them
  }
#pragma unroll
  for (int s0 = 0; s0 < STAGES - 1; ++s0) {
    if (s0 < nlocal) load_chunk(sg.c0 + s0, s0);
    cp_async_commit();
  }
  for (int64_t j = 0; j < nlocal; ++j) {   // j: chunk within the segment (pipeline stages count from it)
    const int64_t cc = sg.c0 + j;
    const int stage = static_cast<int>(j % STAGES);
    if (j + STAGES - 1 < nlocal) load_chunk(cc + STAGES - 1, static_cast<int>((j + STAGES - 1) % STAGES));
    cp_async_commit();
    cp_async_wait<STAGES - 1>();
    if constexpr (BULK) mbar_wait(smem_u32(smem + S_MB + 16 * stage), static_cast<uint32_t>((j / STAGES) & 1));
    __syncthreads();
    const uint8_t* st = smem + stage * S_STAGE;
    const E* sW = reinterpret_cast<const E*>(st + S_W);
    const E* sQg = reinterpret_cast<const E*>(st + S_QG);
    const E* sKg = reinterpret_cast<const E*>(st + S_KG);
    const E* sAq = reinterpret_cast<const E*>(st + S_AQ);
    const E* sU = reinterpret_cast<const E*>(st + S_U);
    const float* sGl = reinterpret_cast<const float*>(st + S_GL);

    // this warp's half of Sᵀ as 16-bit A operands (fp16: the range note at the top) (k-steps over its 64 key channels)
    uint32_t Sb[KH / 16][4];
#pragma unroll
    for (int ks = 0; ks < KH / 16; ++ks) {
      Sb[ks][0] = TC::pack(S[2 * ks][0], S[2 * ks][1]);
      Sb[ks][1] = TC::pack(S[2 * ks][2], S[2 * ks][3]);
      Sb[ks][2] = TC::pack(S[2 * ks + 1][0], S[2 * ks + 1][1]);
      Sb[ks][3] = TC::pack(S[2 * ks + 1][2], S[2 * ks + 1][3]);
    }
    // partial Sᵀwᵀ and Sᵀqgᵀ over this warp's key channels  [16 v][64 tokens] each
    float P[8][4], O[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) P[nt][e] = O[nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KH / 16; ++ks)
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t b[4], c[4];
        ldsm_x4(b, smem_u32(sW + swz<SWZ_W>(16 * np + nrow, kb + 16 * ks + kcol, K)));
        ldsm_x4(c, smem_u32(sQg + swz<SWZ_QG>(16 * np + nrow, kb + 16 * ks + kcol, K)));
        TC::mma(P[2 * np], Sb[ks], b[0], b[1]);
        TC::mma(P[2 * np + 1], Sb[ks], b[2], b[3]);
        if constexpr (!FOLD) {
          TC::mma(O[2 * np], Sb[ks], c[0], c[1]);
          TC::mma(O[2 * np + 1], Sb[ks], c[2], c[3]);
        }
      }
    // exchange: all of P (both warps need v_new), and o of the partner's token half
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) xMine[nt * 32 + lane] = make_float4(P[nt][0], P[nt][1], P[nt][2], P[nt][3]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // (selects, not a run-time index: O stays in registers)
      const float4 lo = make_float4(O[j][0], O[j][1], O[j][2], O[j][3]);
      const float4 hi = make_float4(O[4 + j][0], O[4 + j][1], O[4 + j][2], O[4 + j][3]);
      xMine[(8 + j) * 32 + lane] = kh ? lo : hi;
    }
    pair_sync(pair);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {  // mine + peer in the same order on both warps: identical v_new
      const float4 x = xPeer[nt * 32 + lane];
      P[nt][0] += x.x; P[nt][1] += x.y; P[nt][2] += x.z; P[nt][3] += x.w;
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      if ((nt >> 2) != kh) continue;
      const float4 x = xPeer[(8 + (nt & 3)) * 32 + lane];
      O[nt][0] += x.x; O[nt][1] += x.y; O[nt][2] += x.z; O[nt][3] += x.w;
    }
    // v_newᵀ = uᵀ − Sᵀ wᵀ as 16-bit A operands (k-steps over tokens)
    uint32_t Vb[4][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int tok = 8 * nt + 2 * t4;
      const float2 u_lo = m_cols ? make_float2(0.f, 0.f)
          : TC::unpack(*reinterpret_cast<const uint32_t*>(sU + (16 * pair + g8) * LDS_U + tok));
      const float2 u_hi = m_cols ? make_float2(0.f, 0.f)
          : TC::unpack(*reinterpret_cast<const uint32_t*>(sU + (16 * pair + g8 + 8) * LDS_U + tok));
      const uint32_t lo = TC::pack(u_lo.x - P[nt][0], u_lo.y - P[nt][1]);
      const uint32_t hi = TC::pack(u_hi.x - P[nt][2], u_hi.y - P[nt][3]);
      Vb[nt >> 1][(nt & 1) * 2 + 0] = lo;
      Vb[nt >> 1][(nt & 1) * 2 + 1] = hi;
    }
    // oᵀ (this warp's 32 tokens) += v_newᵀ Aqkᵀ; Aqk is lower triangular: rows 16np.. see columns ≤ 16np+15
    if constexpr (!FOLD) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        if ((np >> 1) != kh) continue;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          if (ks <= np) {
            uint32_t b[4];
            ldsm_x4(b, smem_u32(sAq + swz<SWZ_AQK>(16 * np + nrow, 16 * ks + kcol, BT)));
            TC::mma(O[2 * np], Vb[ks], b[0], b[1]);
            TC::mma(O[2 * np + 1], Vb[ks], b[2], b[3]);
          }
        }
      }
    }
    // Sᵀ ← Sᵀ Diag(2^Γlast) + v_newᵀ kg over this warp's key channels
#pragma unroll
    for (int nt = 0; nt < KH / 8; ++nt) {
      const float2 gl = *reinterpret_cast<const float2*>(sGl + kb + 8 * nt + 2 * t4);
      S[nt][0] *= gl.x; S[nt][1] *= gl.y; S[nt][2] *= gl.x; S[nt][3] *= gl.y;
    }
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int np = 0; np < KH / 16; ++np) {
        uint32_t b[4];
        ldsm_x4_t(b, smem_u32(sKg + swz<SWZ_KG>(16 * ks + krow, kb + 16 * np + ncol, K)));
        TC::mma(S[2 * np], Vb[ks], b[0], b[1]);
        TC::mma(S[2 * np + 1], Vb[ks], b[2], b[3]);
      }
    // o: stage the warp's [32 tokens][16 v] through shared memory, store 16-B pieces of valid rows
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      if (FOLD || (nt >> 2) != kh) continue;
      const int tok = 8 * (nt & 3) + 2 * t4;
      sO[tok * LDS_O + g8] = Elem16<E>::from_f(O[nt][0]);
      sO[(tok + 1) * LDS_O + g8] = Elem16<E>::from_f(O[nt][1]);
      sO[tok * LDS_O + g8 + 8] = Elem16<E>::from_f(O[nt][2]);
      sO[(tok + 1) * LDS_O + g8 + 8] = Elem16<E>::from_f(O[nt][3]);
    }
    __syncwarp();
    const int64_t t0 = sb.bos + cc * BT + 8 * om;
    const int rows = FOLD ? 0 : static_cast<int>(sb.len - cc * BT - 8 * om < BT / 2 ? sb.len - cc * BT - 8 * om : BT / 2);
#pragma unroll
    for (int p = lane; p < BT; p += 32) {
      const int tok = p >> 1, half = p & 1;
      if (tok < rows)
        *reinterpret_cast<uint4*>(o + ((t0 + tok) * HV + hv) * V + vw + 8 * half) =
            *reinterpret_cast<const uint4*>(sO + tok * LDS_O + 8 * half);
    }
    __syncthreads();  // the stage just read is refilled next iteration; the exchange and o tiles are reused
  }

  if (FOLD) {  // [M | B] rows d, columns col0 + v, key-first
    float* tr = reinterpret_cast<float*>(wsb + kda2_split_trans_offset(&a, K, V)) + zrow * K * (K + V);
    const int c = col0 + 16 * pair + g8;
#pragma unroll
    for (int nt = 0; nt < KH / 8; ++nt) {
      const int d = kb + 8 * nt + 2 * t4;
      tr[d * (K + V) + c] = S[nt][0];
      tr[(d + 1) * (K + V) + c] = S[nt][1];
      tr[d * (K + V) + c + 8] = S[nt][2];
      tr[(d + 1) * (K + V) + c + 8] = S[nt][3];
    }
  } else if (a.ht && seg == sg.last) {
    float* ht = a.ht + srow;
#pragma unroll
    for (int nt = 0; nt < KH / 8; ++nt) {
      const int d = kb + 8 * nt + 2 * t4;
      if (V_FIRST) {
        *reinterpret_cast<float2*>(ht + (vw + g8) * K + d) = make_float2(S[nt][0], S[nt][1]);
        *reinterpret_cast<float2*>(ht + (vw + g8 + 8) * K + d) = make_float2(S[nt][2], S[nt][3]);
      } else {
        ht[d * V + vw + g8] = S[nt][0];
        ht[(d + 1) * V + vw + g8] = S[nt][1];
        ht[d * V + vw + g8 + 8] = S[nt][2];
        ht[(d + 1) * V + vw + g8 + 8] = S[nt][3];
      }
    }
  }
}

// =============================================================================================
// State pass on warpgroup MMAs (WG variants, sm_90a): one CTA per (BLOCK_V value columns, value head, sequence ×
// segment), warpgroup wg over value columns vc + 64·wg .. + 63, Sᵀ [64 v][K] (fp32) in m64nK accumulators. FOLD (the
// exact split): the CTAs take the columns of [M | B] instead, no O products, no o. Per chunk:
//   P = Sᵀ wᵀ, O = Sᵀ qgᵀ            B K-major: the w, qg tiles [token][channel] (K-step over channels)
//   Sᵀ ← Sᵀ Diag(2^Γlast)            (while P and O are in flight: they read Sᵀ's 16-bit copy)
//   v_newᵀ = uᵀ − P                  registers → A fragments over tokens
//   O += v_newᵀ Aqkᵀ                  B K-major: Aqk [out token][in token]
//   Sᵀ += v_newᵀ kg                   B N-major: the kg tile [token][channel] (K-step over tokens)
// with the 16-bit operands and fp32 accumulation of the mma.sync pass; the sum over K is inside each MMA, so no
// partial sums cross warps. The tiles arrive as in the mma.sync pass (bulk copies on an mbarrier, STAGES deep); o
// is staged in the consumed stage's w tile (its panel layout), then stored in 16-byte pieces.
// =============================================================================================
template <class Cfg>
template <class E, Pass PASS, bool OV>
__device__ __forceinline__ void Kernels<Cfg>::state_wg(const KDA2RecurrentArgs& a) {
  constexpr bool FOLD = PASS == Pass::FOLD;
  static_assert(K == 64 || K == 128, "Sᵀ is one m64nK accumulator (N ≤ 128 in kda2/wgmma.cuh)");
  static_assert(BLOCK_V * 2 * BT <= BT * K * 2, "the o staging fits in the w tile");
  static_assert(S_STAGE % 1024 == 0 && S_W % 1024 == 0 && S_QG % 1024 == 0 && S_KG % 1024 == 0 && S_AQ % 1024 == 0,
                "descriptor tiles at 1024-byte boundaries");
  using TC = Tc16<E>;
  extern __shared__ __align__(1024) uint8_t smem[];
  const int split = a.split > 1 ? a.split : 1;
  const int hv = blockIdx.y, n = blockIdx.z / split, seg = blockIdx.z - n * split;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  // FOLD: columns 0 .. K-1 of [M | B] are M (u = 0, start I), columns K .. K+V-1 are B (value columns).
  const int col0 = blockIdx.x * BLOCK_V;
  const bool m_cols = FOLD && col0 < K;
  const int vc = FOLD && !m_cols ? col0 - K : col0;   // first value (or M) column of the CTA
  const int vr = 64 * (warp >> 2) + 16 * (warp & 3) + g;   // this thread's value rows vr, vr + 8 (within the CTA)
  const SeqBounds sb = seq_bounds(a, n);
  const int64_t nch = (sb.len + BT - 1) / BT;
  const Segment sg = segment_of(nch, split, seg);
  if (FOLD ? seg >= sg.last : (sg.c0 >= sg.c1 && seg != sg.last)) return;  // uniform over the CTA
  const int HV = a.HV;
  const int64_t srow = (static_cast<int64_t>(n) * HV + hv) * K * V;
  const int64_t zrow = (static_cast<int64_t>(n) * split + seg) * HV + hv;   // this segment's split-region row
  uint8_t* const wsb = static_cast<uint8_t*>(a.workspace);
  if (tid == 0 && (smem_u32(smem) & 1023)) __trap();   // the descriptors' swizzle atoms need 1024-byte alignment

  // Sᵀ: S[4j + e] = Sᵀ[vc + vr + 8·(e / 2)][8j + 2t + e % 2]. The start state: h0 (segment 0), the combine's start
  // state (key-first, later segments), I | 0 (FOLD).
  float S[K / 2];
  {
    const float* h0 = FOLD ? nullptr
                    : seg > 0 ? reinterpret_cast<const float*>(wsb + kda2_split_start_offset(&a, K, V)) + zrow * K * V
                    : a.h0 ? a.h0 + srow : nullptr;
    const int v0 = vc + vr, v1 = v0 + 8;
#pragma unroll
    for (int j = 0; j < K / 8; ++j) {
      const int k = 8 * j + 2 * t;
      if (m_cols) {
        S[4 * j] = v0 == k ? 1.f : 0.f;
        S[4 * j + 1] = v0 == k + 1 ? 1.f : 0.f;
        S[4 * j + 2] = v1 == k ? 1.f : 0.f;
        S[4 * j + 3] = v1 == k + 1 ? 1.f : 0.f;
      } else if (!h0) {
        S[4 * j] = S[4 * j + 1] = S[4 * j + 2] = S[4 * j + 3] = 0.f;
      } else if (V_FIRST && seg == 0) {
        const float2 lo = *reinterpret_cast<const float2*>(h0 + v0 * K + k);
        const float2 hi = *reinterpret_cast<const float2*>(h0 + v1 * K + k);
        S[4 * j] = lo.x; S[4 * j + 1] = lo.y; S[4 * j + 2] = hi.x; S[4 * j + 3] = hi.y;
      } else {
        S[4 * j] = h0[k * V + v0];
        S[4 * j + 1] = h0[(k + 1) * V + v0];
        S[4 * j + 2] = h0[k * V + v1];
        S[4 * j + 3] = h0[(k + 1) * V + v1];
      }
    }
  }

  // One uᵀ slice for every stage (S_UB), each warp copying and waiting for its own rows (load_ut_warp): with one
  // stage they arrive with the chunk's tiles; with more, a warp copies the next chunk's rows as soon as its lanes
  // have read this chunk's (v_new, below), a step ahead of their use.
  const uint32_t su = smem_u32(smem + S_UB);
  auto load_chunk = [&](int64_t cc, int stage, bool with_u) {
    if constexpr (OV) wait_ready(a, sb.bos, n, cc, hv);
    const uint8_t* slot = slot_ptr(a, sb.bos, n, cc, hv);
    const uint32_t st = smem_u32(smem + stage * S_STAGE);
    if (tid == 0) bulk_tiles(st, smem_u32(smem + S_MB + 16 * stage), slot);
    if (with_u && !m_cols) load_ut_warp(su, slot, vc, warp, lane);   // the M columns have u = 0
  };
  if (tid == 0) {
#pragma unroll
    for (int s0 = 0; s0 < STAGES; ++s0) mbar_init(smem_u32(smem + S_MB + 16 * s0), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  // j: chunk within the segment (pipeline stages and phases count from it), c0 + j the sequence's chunk
  const int64_t c0 = sg.c0;
  const int nchi = static_cast<int>(sg.c1 - sg.c0);
#pragma unroll
  for (int s0 = 0; s0 < STAGES - 1; ++s0)
    if (s0 < nchi) load_chunk(c0 + s0, s0, s0 == 0);
  cp_async_commit();
  E* o = static_cast<E*>(a.o);
  // The chunk loop issues ~940 instructions per warp at one warp per scheduler (H200, P5, ncu: 3 cycles each, "wait"
  // and "selected" two thirds of the stall samples), so what is loop-invariant is set up here: the descriptors'
  // base (one add per wgmma), the o staging's row addresses (stmatrix) and the copy-out's pieces.
  const uint32_t base16 = smem_u32(smem) >> 4;   // shared addresses are below 2^18 (kda2/wgmma.cuh desc128)
  // o staging, [token][value column] panels in the consumed stage's w tile: stmatrix.trans p stores the 8×8 blocks
  // (token block 2p + m / 2, value rows 8·(m % 2) of the warp's 16) of the accumulator; lane 8m + r addresses row r
  // (token) of block m, 8 value columns.
  uint32_t ost[BT / 16];
#pragma unroll
  for (int p = 0; p < BT / 16; ++p)
    ost[p] = 2 * panel128_offset(8 * (2 * p + (lane >> 4)) + (lane & 7),
                                 64 * (warp >> 2) + 16 * (warp & 3) + 8 * ((lane >> 3) & 1), BT);
  // copy-out: thread tid takes 16-byte piece pc of token rows tok0 + TPP·m
  constexpr int PCS = BLOCK_V / 8, TPP = STATE_THREADS / PCS;
  static_assert(STATE_THREADS % PCS == 0 && BT % TPP == 0, "o copy-out tiling");
  const int tok0 = tid / PCS, pc = tid % PCS;
  const int64_t o_step = static_cast<int64_t>(TPP) * HV * V;
  for (int j = 0; j < nchi; ++j) {
    const int stage = j % STAGES;
    // Two stages or more: the next tiles' copies start after this barrier, which every thread reaches past its
    // last use of the stage they refill (so the loop needs no barrier at its end). One stage: before the wait.
    if constexpr (STAGES == 1) {
      load_chunk(c0 + j, 0, true);
      cp_async_commit();
    }
    mbar_wait(smem_u32(smem + S_MB + 16 * stage), static_cast<uint32_t>((j / STAGES) & 1));
    __syncthreads();   // every thread is done with the stage refilled next
    if constexpr (STAGES > 1)
      if (j + STAGES - 1 < nchi) load_chunk(c0 + j + STAGES - 1, (j + STAGES - 1) % STAGES, false);
    uint8_t* stp = smem + stage * S_STAGE;
    const uint32_t sd = base16 + stage * (S_STAGE / 16);   // the stage in 16-byte units
    const uint32_t kd = desc_k128_lo(sd), nd = desc_mn128_lo(sd, BT);
    // k-step ks of a K-major tile of the stage (w, qg, Aqk), and of kg read N-major
    auto kslice = [&](int tile, int ks) { return desc128(kd + (tile + k128_slice_bytes(16 * ks, BT)) / 16); };
    auto nslice = [&](int tile, int ks) { return desc128(nd + (tile + mn128_slice_bytes(16 * ks)) / 16); };

    // Sᵀ as 16-bit A fragments, k-steps over channels
    uint32_t Sb[K / 16][4];
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) {
      Sb[ks][0] = TC::pack(S[8 * ks], S[8 * ks + 1]);
      Sb[ks][1] = TC::pack(S[8 * ks + 2], S[8 * ks + 3]);
      Sb[ks][2] = TC::pack(S[8 * ks + 4], S[8 * ks + 5]);
      Sb[ks][3] = TC::pack(S[8 * ks + 6], S[8 * ks + 7]);
    }
    // P = Sᵀwᵀ (the recurrence's chain) and O = Sᵀqgᵀ as two groups: v_newᵀ is formed while O's products run.
    // FOLD has no outputs: P alone.
    float P[BT / 2], O[BT / 2];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks)
      WgmmaRS<E, BT>::run(P, Sb[ks], kslice(S_W, ks), ks > 0);
    wgmma_commit();
    if constexpr (!FOLD) {
#pragma unroll
      for (int ks = 0; ks < K / 16; ++ks)
        WgmmaRS<E, BT>::run(O, Sb[ks], kslice(S_QG, ks), ks > 0);
      wgmma_commit();
      wgmma_wait<1>();
    } else {
      wgmma_wait<0>();
    }
    wgmma_hold(P);
    {  // the decay of Sᵀ's columns, while the MMAs above run on its 16-bit copy
      const float* sGl = reinterpret_cast<const float*>(stp + S_GL);
#pragma unroll
      for (int jj = 0; jj < K / 8; ++jj) {
        const float2 gl = *reinterpret_cast<const float2*>(sGl + 8 * jj + 2 * t);
        S[4 * jj] *= gl.x; S[4 * jj + 1] *= gl.y; S[4 * jj + 2] *= gl.x; S[4 * jj + 3] *= gl.y;
      }
    }
    // v_newᵀ = uᵀ − P as 16-bit A fragments, k-steps over tokens: P[4jj + e] = (row vr + 8·(e / 2), token 8jj + 2t + e % 2)
    const E* sU = reinterpret_cast<const E*>(smem + S_UB);
    cp_async_wait<0>();   // this warp's uᵀ rows (its only cp.async group in flight) ...
    __syncwarp();         // ... visible to all its lanes
    uint32_t Vb[BT / 16][4];
#pragma unroll
    for (int jj = 0; jj < BT / 8; ++jj) {
      const int tok = 8 * jj + 2 * t;
      const float2 u_lo = m_cols ? make_float2(0.f, 0.f)
          : TC::unpack(*reinterpret_cast<const uint32_t*>(sU + vr * LDS_U + tok));
      const float2 u_hi = m_cols ? make_float2(0.f, 0.f)
          : TC::unpack(*reinterpret_cast<const uint32_t*>(sU + (vr + 8) * LDS_U + tok));
      Vb[jj >> 1][(jj & 1) * 2] = TC::pack(u_lo.x - P[4 * jj], u_lo.y - P[4 * jj + 1]);
      Vb[jj >> 1][(jj & 1) * 2 + 1] = TC::pack(u_hi.x - P[4 * jj + 2], u_hi.y - P[4 * jj + 3]);
    }
    if constexpr (STAGES > 1) {   // the warp's lanes are past their uᵀ reads: its rows of the next chunk (flag acquired)
      __syncwarp();
      if (j + 1 < nchi && !m_cols) load_ut_warp(su, slot_ptr(a, sb.bos, n, c0 + j + 1, hv), vc, warp, lane);
      cp_async_commit();
    }
    wgmma_fence();   // Vb and the decayed Sᵀ were written by ordinary instructions
    if constexpr (!FOLD) {
#pragma unroll
      for (int ks = 0; ks < BT / 16; ++ks)
        WgmmaRS<E, BT>::run(O, Vb[ks], kslice(S_AQ, ks), true);
    }
#pragma unroll
    for (int ks = 0; ks < BT / 16; ++ks)
      WgmmaRS<E, K, true>::run(S, Vb[ks], nslice(S_KG, ks), true);
    wgmma_commit();
    wgmma_wait<0>();
    if constexpr (!FOLD) wgmma_hold(O);
    wgmma_hold(S);
    if constexpr (FOLD) {
      if constexpr (STAGES == 1) __syncthreads();   // the stage is refilled next iteration
      continue;
    }

    // o: [token][value column of the CTA] staged in this stage's w tile (every warpgroup is past its reads of it)
    __syncthreads();
    {
      const uint32_t so = smem_u32(stp + S_W);
#pragma unroll
      for (int p = 0; p < BT / 16; ++p) {
        uint32_t r[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int jj = 2 * p + (m >> 1), e = 2 * (m & 1);
          r[m] = TC::pack(O[4 * jj + e], O[4 * jj + e + 1]);
        }
        stsm_x4_t(r, so + ost[p]);
      }
    }
    __syncthreads();
    {
      const E* sO = reinterpret_cast<const E*>(stp + S_W);
      const int64_t cc = c0 + j, t0 = sb.bos + cc * BT;
      const int rows = static_cast<int>(sb.len - cc * BT < BT ? sb.len - cc * BT : BT);
      E* og = o + ((t0 + tok0) * HV + hv) * V + vc + 8 * pc;
#pragma unroll
      for (int m = 0; m < BT / TPP; ++m)
        if (rows == BT || tok0 + TPP * m < rows)
          *reinterpret_cast<uint4*>(og + m * o_step) =
              *reinterpret_cast<const uint4*>(sO + panel128_offset(tok0 + TPP * m, 8 * pc, BT));
    }
    fence_proxy_async();   // these generic accesses of the w tile come before the bulk copy that refills it
    if constexpr (STAGES == 1) __syncthreads();
  }

  if (FOLD) {  // [M | B] rows k, columns col0 + vr (+ 8), key-first
    float* tr = reinterpret_cast<float*>(wsb + kda2_split_trans_offset(&a, K, V)) + zrow * K * (K + V);
    const int c = col0 + vr;
#pragma unroll
    for (int j = 0; j < K / 8; ++j) {
      const int k = 8 * j + 2 * t;
      tr[k * (K + V) + c] = S[4 * j];
      tr[(k + 1) * (K + V) + c] = S[4 * j + 1];
      tr[k * (K + V) + c + 8] = S[4 * j + 2];
      tr[(k + 1) * (K + V) + c + 8] = S[4 * j + 3];
    }
  } else if (a.ht && seg == sg.last) {
    float* ht = a.ht + srow;
    const int v0 = vc + vr, v1 = v0 + 8;
#pragma unroll
    for (int j = 0; j < K / 8; ++j) {
      const int k = 8 * j + 2 * t;
      if (V_FIRST) {
        *reinterpret_cast<float2*>(ht + v0 * K + k) = make_float2(S[4 * j], S[4 * j + 1]);
        *reinterpret_cast<float2*>(ht + v1 * K + k) = make_float2(S[4 * j + 2], S[4 * j + 3]);
      } else {
        ht[k * V + v0] = S[4 * j];
        ht[(k + 1) * V + v0] = S[4 * j + 1];
        ht[k * V + v1] = S[4 * j + 2];
        ht[(k + 1) * V + v1] = S[4 * j + 3];
      }
    }
  }
}

// =============================================================================================
// Split combine: one CTA per (COMBINE_COLS value columns, value head, sequence); thread (row i, half) keeps half of
// them in row i of the next start state. fp32 FMAs: the start states are the one place where the split could lose
// precision, and the work is a few K×K by K×COMBINE_COLS products per CTA.
// =============================================================================================
template <class Cfg>
__device__ __forceinline__ void Kernels<Cfg>::combine(const KDA2RecurrentArgs& a) {
  static_assert(COMBINE_THREADS == 2 * K && V % COMBINE_COLS == 0 && COMBINE_COLS % 8 == 0 && LDS_X >= COMBINE_COLS,
                "combine tiling: two threads per key row, each a whole number of 16-byte pieces of it");
  __shared__ __align__(16) float X[K][LDS_X];   // the running start state, this CTA's columns (padded rows)
  const int split = a.split, hv = blockIdx.y, n = blockIdx.z, v0 = blockIdx.x * COMBINE_COLS;
  const int tid = threadIdx.x, i = tid >> 1, c0 = (tid & 1) * (COMBINE_COLS / 2);
  const SeqBounds sb = seq_bounds(a, n);
  const Segment sg = segment_of((sb.len + BT - 1) / BT, split, 0);
  if (sg.last == 0) return;
  const int HV = a.HV;
  const int64_t srow = (static_cast<int64_t>(n) * HV + hv) * K * V;
  uint8_t* const wsb = static_cast<uint8_t*>(a.workspace);
  const float* trans = reinterpret_cast<const float*>(wsb + kda2_split_trans_offset(&a, K, V));
  float* starts = reinterpret_cast<float*>(wsb + kda2_split_start_offset(&a, K, V));
  for (int e = tid; e < K * COMBINE_COLS; e += COMBINE_THREADS) {
    const int d = e / COMBINE_COLS, c = e - d * COMBINE_COLS;
    X[d][c] = !a.h0 ? 0.f : V_FIRST ? a.h0[srow + static_cast<int64_t>(v0 + c) * K + d] : a.h0[srow + d * V + v0 + c];
  }
  __syncthreads();
  // A segment waits on a chain of loads of its row of M_s (K fp32): read in batches of MB 16-byte loads, with the
  // next segment's rows prefetched into L2 as this one starts (measured on the H200, K7 = T1024 H4 split 4: under
  // ncu the combine took 54 µs, more than its prep and fold together; the call 0.073 → 0.068 ms). At K = 256 the
  // block has 512 threads, so 128 registers each.
  constexpr int MB = K > 128 ? 2 : 8;
  static_assert(K % (4 * MB) == 0, "whole batches of M's row");
  // row i of segment s's transition: trans + (s · HV) · K (K + V) + row0; the two threads of a row prefetch a half each
  const float* const row0 = trans + (static_cast<int64_t>(n) * split * HV + hv) * K * (K + V) + i * (K + V);
  const int64_t seg_stride = static_cast<int64_t>(HV) * K * (K + V);
  if (sg.last > 0) prefetch_l2_lines<K / 2>(row0 + (tid & 1) * (K / 2));
#pragma unroll 1
  for (int s = 0; s < sg.last; ++s) {
    const float* tr = row0 + s * seg_stride;
    if (s + 1 < sg.last) prefetch_l2_lines<K / 2>(tr + seg_stride + (tid & 1) * (K / 2));
    float acc[COMBINE_COLS / 2];
#pragma unroll
    for (int e = 0; e < COMBINE_COLS / 2; ++e) acc[e] = tr[K + v0 + c0 + e];
#pragma unroll 1
    for (int j0 = 0; j0 < K; j0 += 4 * MB) {
      float4 m[MB];
#pragma unroll
      for (int b = 0; b < MB; ++b) m[b] = *reinterpret_cast<const float4*>(tr + j0 + 4 * b);
#pragma unroll
      for (int b = 0; b < MB; ++b) {
        const float mj[4] = {m[b].x, m[b].y, m[b].z, m[b].w};
#pragma unroll
        for (int jj = 0; jj < 4; ++jj)
#pragma unroll
          for (int e = 0; e < COMBINE_COLS / 2; e += 4) {
            const float4 x = *reinterpret_cast<const float4*>(&X[j0 + 4 * b + jj][c0 + e]);
            acc[e] = fmaf(mj[jj], x.x, acc[e]);
            acc[e + 1] = fmaf(mj[jj], x.y, acc[e + 1]);
            acc[e + 2] = fmaf(mj[jj], x.z, acc[e + 2]);
            acc[e + 3] = fmaf(mj[jj], x.w, acc[e + 3]);
          }
      }
    }
    __syncthreads();   // every thread has read X
    float* st = starts + ((static_cast<int64_t>(n) * split + s + 1) * HV + hv) * K * V + i * V + v0 + c0;
#pragma unroll
    for (int e = 0; e < COMBINE_COLS / 2; e += 4) {   // 16-byte stores: the access the TIR model declares
      *reinterpret_cast<float4*>(&X[i][c0 + e]) = make_float4(acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
      *reinterpret_cast<float4*>(st + e) = make_float4(acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
    }
    __syncthreads();
  }
}

}  // namespace kda2::chunk
