// KDA² C ABI, version 1. Shared by every lib<spec>.<arch>.so; mirrored field for field by
// kda2/runtime/abi.py (ctypes). Change a field only together with KDA2_ABI_VERSION.
#pragma once
#include <stdint.h>

#define KDA2_ABI_VERSION 1

// Gate activation applied to `g` inside the kernel (DESIGN §1).
enum KDA2GateMode {
  KDA2_GATE_PRECOMPUTED = 0,  // g is the log decay already (g <= 0)
  KDA2_GATE_SOFTPLUS = 1,     // g = -exp(A_log[hv]) * softplus(g + dt_bias[hv*K+k])
  KDA2_GATE_LOWER_BOUND = 2,  // g = lower_bound * sigmoid(exp(A_log[hv]) * (g + dt_bias[hv*K+k]))
};

// Bits of KDA2RecurrentArgs::flags.
enum KDA2Flags {
  KDA2_QK_L2NORM = 1 << 0,      // q, k <- x / sqrt(sum x^2 + 1e-6)
  KDA2_BETA_SIGMOID = 1 << 1,   // beta <- sigmoid(beta)
  KDA2_NEG_EIGVAL = 1 << 2,     // beta <- 2 * sigmoid(beta) (needs KDA2_BETA_SIGMOID)
  KDA2_G_BF16 = 1 << 3,         // g is bf16 (else fp32)
  KDA2_BETA_BF16 = 1 << 4,      // beta is bf16 (else fp32)
  KDA2_HAS_A_LOG = 1 << 5,      // A_log given (lower_bound mode may omit it)
  KDA2_HAS_DT_BIAS = 1 << 6,    // dt_bias given
};

// Negative return codes; positive ones are CUresult values of the CUDA driver API.
enum KDA2Status {
  KDA2_OK = 0,
  KDA2_ERR_BUCKET_OVERFLOW = -1,   // max_seqlen above the largest bucket built
  KDA2_ERR_LAYOUT = -2,            // state layout not built
  KDA2_ERR_FEATURE = -3,           // gate mode / flag not compiled into this library
  KDA2_ERR_BAD_INDEX = -4,         // no variant with that index
  KDA2_ERR_SHAPE = -5,             // H/HV/N inconsistent
  KDA2_ERR_DRIVER = -6,            // libcuda.so.1 could not be opened (no NVIDIA driver)
  KDA2_ERR_NO_CONTEXT = -7,        // no current CUDA context (initialise CUDA first), or too many
};

typedef struct KDA2RecurrentArgs {
  const void* q;          // [B*T or total, H, K]   bf16
  const void* k;          // [B*T or total, H, K]   bf16
  const void* v;          // [B*T or total, HV, V]  bf16
  const void* g;          // [B*T or total, HV, K]  fp32 or bf16 (KDA2_G_BF16)
  const void* beta;       // [B*T or total, HV]     fp32 or bf16 (KDA2_BETA_BF16)
  const float* A_log;     // [HV] or NULL
  const float* dt_bias;   // [HV*K] or NULL
  void* o;                // [B*T or total, HV, V]  bf16, fully written
  const float* h0;        // initial states [*, HV, K, V] (or [*, HV, V, K]) fp32, or NULL (zeros)
  float* ht;              // final states, same layout, or NULL; may equal h0 (in place)
  const int64_t* cu_seqlens;     // [N+1] or NULL (dense: sequence n is tokens n*T .. n*T+T-1)
  const int32_t* state_indices;  // [N] rows of h0/ht per sequence, or NULL (row n); < 0: skip
  int32_t N;              // sequences
  int32_t T;              // tokens per sequence (dense); ignored with cu_seqlens
  int32_t H;              // q/k heads
  int32_t HV;             // value heads, HV % H == 0
  float scale;
  float lower_bound;
  int32_t gate_mode;      // KDA2GateMode
  int32_t flags;          // KDA2Flags
  int32_t state_v_first;  // 0: states [K, V]; 1: states [V, K]
  int32_t reserved;
} KDA2RecurrentArgs;

#ifdef __cplusplus
extern "C" {
#endif
int kda2_abi_version(void);
const char* kda2_library_json(void);   // {"spec":..., "arch":..., "variants":[{...}, ...]}
int kda2_num_variants(void);
// Index of the variant the dispatch table picks for (layout, max_seqlen), or a KDA2Status < 0.
int kda2_select(int32_t state_v_first, int64_t max_seqlen);
// Load every variant's cubin into the current context (call before CUDA graph capture).
int kda2_preload(void);
// Launch variant `index` (as listed in kda2_library_json) on `stream`.
int kda2_launch(int index, const KDA2RecurrentArgs* args, void* stream);
// kda2_select + kda2_launch.
int kda2_recurrent_fwd(const KDA2RecurrentArgs* args, int64_t max_seqlen, void* stream);
#ifdef __cplusplus
}
#endif
