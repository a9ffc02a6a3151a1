// GENERATED from kda2/artifact/abi.py -- do not edit; edit the tables there, then regenerate with
//   PYTHONPATH=src python -m kda2.artifact.abi --write
// (tests/test_abi_facts.py fails while this file and the tables disagree).
//
// KDA² C ABI, version 5. Shared by every lib<spec>.<arch>.so (families recurrent and
// chunk) and by the kernels, which take KDA2RecurrentArgs by value; kda2.runtime.abi mirrors it with
// ctypes, built from the same tables. Change a field only together with KDA2_ABI_VERSION.
//
// Version 1: KDA2RecurrentArgs up to `reserved`; the recurrent family only.
//
// Version 2: KDA2RecurrentArgs gains workspace, workspace_bytes and max_seqlen (appended); kda2_fwd,
// kda2_workspace_bytes and KDA2_ERR_WORKSPACE; the library JSON names its family.
//
// Version 3: Flags KDA2_A_LOG_BF16, KDA2_DT_BIAS_BF16 (gate parameters in bf16), KDA2_INPUT_FP16 (q/k/v/o,
// and g or beta when 16-bit, in fp16) and KDA2_STATE_BF16 (h0/ht/intermediate in bf16); KDA2_ERR_DTYPE;
// KDA2RecurrentArgs gains `intermediate` (per-token states, appended); varlen max_seqlen may be an upper
// bound (the token count); HV / H is any integer ratio; `reserved` becomes `split` (chunk libraries: segments
// per sequence, 0 = the library's choice) and the chunk workspace gains the split region after the slots.
//
// Version 4: Batch classes: a dispatch table has one row per (layout, bucket, class), a class serving calls
// of at least `min_chains` state chains (N * HV); kda2_select takes `chains`; kda2_route names the row it
// picks.
//
// Version 5: Flags KDA2_CHUNK_OVERLAP / KDA2_CHUNK_NO_OVERLAP (chunk libraries: the state pass beside the
// prep, asked for or refused; neither: the library's choice) and the chunk workspace's ready region after the
// split region (a work counter and one ready flag per slot).
#pragma once
#include <stdint.h>

#define KDA2_ABI_VERSION 5

// Gate activation applied to `g` inside the kernel (docs/DESIGN.md §1).
enum KDA2GateMode {
  KDA2_GATE_PRECOMPUTED = 0,  // g is the log decay already (g <= 0)
  KDA2_GATE_SOFTPLUS = 1,     // g = -exp(A_log[hv]) * softplus(g + dt_bias[hv*K+k])
  KDA2_GATE_LOWER_BOUND = 2,  // g = lower_bound * sigmoid(exp(A_log[hv]) * (g + dt_bias[hv*K+k]))
};

// Bits of KDA2RecurrentArgs::flags.
enum KDA2Flags {
  KDA2_QK_L2NORM = 1 << 0,          // q, k <- x / sqrt(sum x^2 + 1e-6)
  KDA2_BETA_SIGMOID = 1 << 1,       // beta <- sigmoid(beta)
  KDA2_NEG_EIGVAL = 1 << 2,         // beta <- 2 * sigmoid(beta) (needs KDA2_BETA_SIGMOID)
  KDA2_G_BF16 = 1 << 3,             // g is 16-bit, in the input dtype (bf16, or fp16 with KDA2_INPUT_FP16); else fp32
  KDA2_BETA_BF16 = 1 << 4,          // beta is 16-bit, in the input dtype (bf16, or fp16 with KDA2_INPUT_FP16); else fp32
  KDA2_HAS_A_LOG = 1 << 5,          // A_log given (lower_bound mode may omit it)
  KDA2_HAS_DT_BIAS = 1 << 6,        // dt_bias given
  KDA2_A_LOG_BF16 = 1 << 7,         // A_log is bf16 (else fp32); read as fp32 (recurrent libraries)
  KDA2_DT_BIAS_BF16 = 1 << 8,       // dt_bias is bf16 (else fp32); read as fp32 (recurrent libraries)
  KDA2_INPUT_FP16 = 1 << 9,         // q, k, v and o are fp16 (else bf16); recurrent libraries built with fp16
  KDA2_STATE_BF16 = 1 << 10,        // h0, ht and intermediate are bf16 (else fp32); recurrent decode kernels built with them
  KDA2_CHUNK_OVERLAP = 1 << 11,     // chunk: the state pass beside the prep (docs/DESIGN.md §1 overlap), where the GPU holds both
  KDA2_CHUNK_NO_OVERLAP = 1 << 12,  // chunk: never overlap the state pass with the prep
};

// Negative return codes; positive ones are CUresult values of the CUDA driver API.
enum KDA2Status {
  KDA2_OK = 0,
  KDA2_ERR_BUCKET_OVERFLOW = -1,  // max_seqlen above the largest bucket built (recurrent libraries)
  KDA2_ERR_LAYOUT = -2,           // state layout not built
  KDA2_ERR_FEATURE = -3,          // gate mode / flag not compiled into this library
  KDA2_ERR_BAD_INDEX = -4,        // no variant with that index
  KDA2_ERR_SHAPE = -5,            // H/HV/N/T/max_seqlen inconsistent
  KDA2_ERR_DRIVER = -6,           // libcuda.so.1 could not be opened (no NVIDIA driver)
  KDA2_ERR_NO_CONTEXT = -7,       // no current CUDA context (initialise CUDA first), or too many
  KDA2_ERR_WORKSPACE = -8,        // workspace NULL or smaller than kda2_workspace_bytes() (chunk libraries)
  KDA2_ERR_DTYPE = -9,            // input dtype (KDA2_INPUT_FP16) or gate parameter dtype not built into this library
};

typedef struct KDA2RecurrentArgs {
  const void* q;                 // [B*T or total, H, K]   bf16 (fp16 with KDA2_INPUT_FP16)
  const void* k;                 // [B*T or total, H, K]   bf16 (fp16 with KDA2_INPUT_FP16)
  const void* v;                 // [B*T or total, HV, V]  bf16 (fp16 with KDA2_INPUT_FP16)
  const void* g;                 // [B*T or total, HV, K]  fp32 or bf16 (KDA2_G_BF16)
  const void* beta;              // [B*T or total, HV]     fp32 or bf16 (KDA2_BETA_BF16)
  const float* A_log;            // [HV] or NULL; fp32, or bf16 with KDA2_A_LOG_BF16
  const float* dt_bias;          // [HV*K] or NULL; fp32, or bf16 with KDA2_DT_BIAS_BF16
  void* o;                       // [B*T or total, HV, V]  input dtype, fully written
  const float* h0;               // initial states [*, HV, K, V] (or [*, HV, V, K]) fp32 (bf16 with KDA2_STATE_BF16), or NULL (zeros)
  float* ht;                     // final states, same layout, or NULL; may equal h0 (in place)
  const int64_t* cu_seqlens;     // [N+1] or NULL (dense: sequence n is tokens n*T .. n*T+T-1)
  const int32_t* state_indices;  // [N] rows of h0/ht per sequence, or NULL (row n); < 0: skip
  int32_t N;                     // sequences
  int32_t T;                     // tokens per sequence (dense); with cu_seqlens: total packed tokens
  int32_t H;                     // q/k heads
  int32_t HV;                    // value heads, HV % H == 0 (any ratio; value head hv reads q/k head hv / (HV/H))
  float scale;
  float lower_bound;
  int32_t gate_mode;             // KDA2GateMode
  int32_t flags;                 // KDA2Flags
  int32_t state_v_first;         // 0: states [K, V]; 1: states [V, K]
  int32_t split;                 // chunk: segments per sequence (docs/DESIGN.md §1 exact split); 0: library's choice
  // ---- ABI 2 ----
  void* workspace;               // chunk libraries: device scratch of >= kda2_workspace_bytes() bytes; else NULL
  int64_t workspace_bytes;       // size of workspace
  int64_t max_seqlen;            // longest sequence, or an upper bound (varlen: the token count); kda2_fwd fills it in (chunk dense: <= 0 means T)
  // ---- ABI 3 ----
  float* intermediate;           // recurrent: NULL, or the state after every token [B*T or total, HV, K, V] (state layout and dtype)
} KDA2RecurrentArgs;

// Host and device (the chunk kernels index the workspace with the same helpers as the library).
#if defined(__CUDACC__)
#define KDA2_HD __host__ __device__
#else
#define KDA2_HD
#endif

// ---- chunk family workspace ----
// Tokens per chunk (the kernels' BT).
#define KDA2_CHUNK 64
// Workspace: one slot per (chunk id, value head), holding back to back: w [64][K] bf16 at KDA2_CHUNK_OFF_W;
// qg [64][K] bf16 at KDA2_CHUNK_OFF_QG; kg [64][K] bf16 at KDA2_CHUNK_OFF_KG; u^T [V][64] bf16 at
// KDA2_CHUNK_OFF_UT; masked Aqk [64][64] bf16 at KDA2_CHUNK_OFF_AQK; last gate row [K] fp32 at
// KDA2_CHUNK_OFF_GLAST. Byte offsets for key / value dims (K, V); constant expressions in C and C++.
#define KDA2_CHUNK_OFF_W(K, V) ((int64_t)0)
#define KDA2_CHUNK_OFF_QG(K, V) (KDA2_CHUNK_OFF_W(K, V) + KDA2_CHUNK * (int64_t)(K) * 2)
#define KDA2_CHUNK_OFF_KG(K, V) (KDA2_CHUNK_OFF_QG(K, V) + KDA2_CHUNK * (int64_t)(K) * 2)
#define KDA2_CHUNK_OFF_UT(K, V) (KDA2_CHUNK_OFF_KG(K, V) + KDA2_CHUNK * (int64_t)(K) * 2)
#define KDA2_CHUNK_OFF_AQK(K, V) (KDA2_CHUNK_OFF_UT(K, V) + (int64_t)(V) * KDA2_CHUNK * 2)
#define KDA2_CHUNK_OFF_GLAST(K, V) (KDA2_CHUNK_OFF_AQK(K, V) + (int64_t)KDA2_CHUNK * KDA2_CHUNK * 2)
#define KDA2_CHUNK_SLOT_BYTES(K, V) (KDA2_CHUNK_OFF_GLAST(K, V) + (int64_t)(K) * 4)
// Chunk ids: enough for every sequence's chunks, partial last chunks included.
#define KDA2_CHUNK_IDS(total, N) ((total) / KDA2_CHUNK + (N) + 1)

static inline KDA2_HD int64_t kda2_chunk_slot_bytes(int K, int V) {
  return KDA2_CHUNK_SLOT_BYTES(K, V);
}
// Chunk ids of a launch: total/64 + N + 1 (total: packed tokens with cu_seqlens, else N*T).
static inline KDA2_HD int64_t kda2_chunk_ids(const KDA2RecurrentArgs* a) {
  int64_t total = a->cu_seqlens ? a->T : (int64_t)a->N * a->T;
  return KDA2_CHUNK_IDS(total, (int64_t)a->N);
}
// Most segments per sequence (a->split).
#define KDA2_MAX_SPLIT 64
// Split region (a->split > 1), after the slots: transitions [M | B] fp32 [K][K+V] per (sequence,
// segment, value head), then start states fp32 [K][V] per (sequence, segment, value head).
static inline KDA2_HD int64_t kda2_split_trans_offset(const KDA2RecurrentArgs* a, int K, int V) {
  return kda2_chunk_ids(a) * a->HV * kda2_chunk_slot_bytes(K, V);
}
static inline KDA2_HD int64_t kda2_split_start_offset(const KDA2RecurrentArgs* a, int K, int V) {
  return kda2_split_trans_offset(a, K, V) + (int64_t)a->N * a->split * a->HV * K * (K + V) * 4;
}
static inline KDA2_HD int64_t kda2_split_bytes(const KDA2RecurrentArgs* a, int K, int V) {
  if (a->split <= 1) return 0;
  return (int64_t)a->N * a->split * a->HV * K * (int64_t)(K + V) * 4 + (int64_t)a->N * a->split * a->HV * K * V * 4;
}
// Ready region, after the split region: the overlapped prep's work counter (int32) in a head of
// KDA2_READY_HEAD_BYTES, then one int32 ready flag per slot (index (chunk id) * HV + value head).
#define KDA2_READY_HEAD_BYTES 16
static inline KDA2_HD int64_t kda2_ready_offset(const KDA2RecurrentArgs* a, int K, int V) {
  return kda2_split_trans_offset(a, K, V) + kda2_split_bytes(a, K, V);
}
static inline KDA2_HD int64_t kda2_ready_bytes(const KDA2RecurrentArgs* a) {
  return KDA2_READY_HEAD_BYTES + (kda2_chunk_ids(a) * a->HV * 4 + 15) / 16 * 16;
}

#ifdef __cplusplus
extern "C" {
#endif
// KDA2_ABI_VERSION the library was built with.
int kda2_abi_version(void);
// NUL-terminated JSON: {"abi_version", "spec", "arch", "family", "k", "v", "variants", "dispatch"}.
const char* kda2_library_json(void);
// Number of variants (indices 0 .. n-1 of kda2_launch).
int kda2_num_variants(void);
// Row of the dispatch table (as listed in kda2_library_json) for (layout, max_seqlen, chains = N * HV): the
// smallest bucket >= max_seqlen, then the row of that bucket with the largest min_chains <= chains; or a
// KDA2Status < 0. Chunk libraries route a max_seqlen above the largest bucket to the last bucket.
int kda2_route(int32_t state_v_first, int64_t max_seqlen, int64_t chains);
// Index of the variant kda2_route's row calls, or a KDA2Status < 0.
int kda2_select(int32_t state_v_first, int64_t max_seqlen, int64_t chains);
// Workspace bytes a launch with these args needs (N, T, HV, cu_seqlens are read): 0 for recurrent libraries,
// kda2_chunk_ids(a) * HV * kda2_chunk_slot_bytes(K, V) plus the split region of the split the library will
// launch with (args->split, or when 0 its choice under the library-wide bound, which a dispatch row's bound
// never exceeds) and the ready region for chunk ones; < 0: a KDA2Status.
int64_t kda2_workspace_bytes(const KDA2RecurrentArgs* args);
// Load every variant's cubin into the current context (call before CUDA graph capture).
int kda2_preload(void);
// Launch variant `index` (as listed in kda2_library_json) on `stream` (args->max_seqlen as given).
int kda2_launch(int index, const KDA2RecurrentArgs* args, void* stream);
// kda2_select (chains = args->N * args->HV) + kda2_launch, with args->max_seqlen set to max_seqlen; chunk
// libraries: the library's own split choice (args->split 0) at most the routed row's max_split.
int kda2_fwd(const KDA2RecurrentArgs* args, int64_t max_seqlen, void* stream);
// The ABI 1 name of kda2_fwd.
int kda2_recurrent_fwd(const KDA2RecurrentArgs* args, int64_t max_seqlen, void* stream);
#ifdef __cplusplus
}
#endif
