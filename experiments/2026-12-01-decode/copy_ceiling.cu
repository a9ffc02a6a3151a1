// What a decode step's state traffic can reach on this GPU: in-place read-modify-write of a state-sized buffer
// (every byte read once and written once, as a T = 1 decode does with its state pool), timed like
// `kda2 bench recurrent` (L2 flushed before each call, CUDA events around one launch, median), against the
// device-to-device copy the bench's "% of copy" divides by. Standalone: nvcc -std=c++17 -O3 -arch=sm_90a.
//
// Forms:
//   memcpy            cudaMemcpyAsync D2D (what torch's copy_ runs), src != dst
//   reg<T,V,B,I>      a CTA of T threads loads V float4 per thread (one tile) into registers, scales, stores back;
//                     B = min CTAs per SM in __launch_bounds__; I = first read the tile's index from an index array
//                     (the pool row a decode CTA reads before its state)
//   bulk<S,I>         a CTA moves one S-byte tile by cp.async.bulk into shared memory, scales it, and writes it back
//                     by cp.async.bulk (the copy engine holds the bytes in flight, not the registers)
//   ring<S,N>         persistent: a CTA per SM slot loops over tiles with an N-deep ring of S-byte bulk loads
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      exit(2);                                                                                 \
    }                                                                                          \
  } while (0)

template <int T, int V, int B, bool I>
__global__ void __launch_bounds__(T, B) reg_tile(float4* p, const int* idx, float s) {
  long tile = blockIdx.x;
  if (I) tile = idx[tile];
  float4* q = p + tile * (long)(T * V) + threadIdx.x;
  float4 r[V];
#pragma unroll
  for (int i = 0; i < V; ++i) r[i] = __ldcs(q + i * T);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    r[i].x *= s; r[i].y *= s; r[i].z *= s; r[i].w *= s;
    __stcs(q + i * T, r[i]);
  }
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t* m, int n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(m)), "r"(n));
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* m) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(m)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(m)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* m, uint32_t parity) {
  asm volatile(
      "{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" ::"r"(smem_u32(m)),
      "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_store(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_u32(src)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory"); }

template <int S, bool I>
__global__ void __launch_bounds__(128) bulk_tile(char* p, const int* idx, float s) {
  extern __shared__ __align__(128) float4 buf[];
  __shared__ uint64_t bar;
  long tile = blockIdx.x;
  if (I) tile = idx[tile];
  char* g = p + tile * (long)S;
  if (threadIdx.x == 0) {
    mbar_init(&bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    bulk_load(buf, g, S, &bar);
  }
  __syncthreads();
  mbar_wait(&bar, 0);
  for (int i = threadIdx.x; i < S / 16; i += 128) {
    float4 r = buf[i];
    r.x *= s; r.y *= s; r.z *= s; r.w *= s;
    buf[i] = r;
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    bulk_store(g, buf, S);
    bulk_wait_read<0>();
  }
}

template <int S, int N>
__global__ void __launch_bounds__(128) ring_tile(char* p, long tiles, float s) {
  extern __shared__ __align__(128) float4 buf[];
  __shared__ uint64_t bar[N];
  constexpr int F4 = S / 16;
  if (threadIdx.x == 0) {
    for (int i = 0; i < N; ++i) mbar_init(&bar[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int i = 0; i < N; ++i) {
      const long t = blockIdx.x + (long)i * gridDim.x;
      if (t < tiles) bulk_load(buf + i * F4, p + t * S, S, &bar[i]);
    }
  }
  __syncthreads();
  int k = 0;
  for (long t = blockIdx.x, it = 0; t < tiles; t += gridDim.x, ++it) {
    const int slot = (int)(it % N);
    mbar_wait(&bar[slot], (uint32_t)((it / N) & 1));
    float4* b = buf + slot * F4;
    for (int i = threadIdx.x; i < F4; i += 128) {
      float4 r = b[i];
      r.x *= s; r.y *= s; r.z *= s; r.w *= s;
      b[i] = r;
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      bulk_store(p + t * S, b, S);
      // Refill the slot with tile it + N once the store has read it out.
      const long tn = t + (long)N * gridDim.x;
      if (tn < tiles) {
        bulk_wait_read<0>();
        bulk_load(b, p + tn * S, S, &bar[slot]);
      }
    }
    (void)k;
  }
  if (threadIdx.x == 0) bulk_wait_read<0>();
}

struct Bench {
  float* buf;      // the in-place buffer
  float* src;      // memcpy's source
  char* flush;     // L2 flush scratch
  int* idx;        // tile order (identity, or a permutation)
  size_t flush_bytes = 256u << 20;
  cudaEvent_t e0, e1;
};

template <class F>
double time_ms(Bench& b, F launch, int reps = 31) {
  std::vector<float> ms;
  for (int r = 0; r < reps + 3; ++r) {
    CK(cudaMemsetAsync(b.flush, r & 0xff, b.flush_bytes));
    CK(cudaEventRecord(b.e0));
    launch();
    CK(cudaGetLastError());
    CK(cudaEventRecord(b.e1));
    CK(cudaEventSynchronize(b.e1));
    float t;
    CK(cudaEventElapsedTime(&t, b.e0, b.e1));
    if (r >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

static double g_copy_tbps = 0;
static void report(const char* name, size_t bytes, double ms) {
  const double tbps = 2.0 * bytes / (ms * 1e-3) / 1e12;
  printf("%-34s %10.1f MB  %9.2f us  %6.3f TB/s  %5.1f %% of 1 GiB copy\n", name, bytes / 1e6, ms * 1e3, tbps,
         g_copy_tbps > 0 ? 100 * tbps / g_copy_tbps : 100.0);
  fflush(stdout);
}

template <int T, int V, int B, bool I>
void run_reg(Bench& b, size_t bytes, const char* name) {
  constexpr long tile = (long)T * V * 16;
  const long tiles = bytes / tile;
  double ms = time_ms(b, [&] { reg_tile<T, V, B, I><<<tiles, T>>>((float4*)b.buf, b.idx, 1.0f); });
  report(name, bytes, ms);
}

template <int S, bool I>
void run_bulk(Bench& b, size_t bytes, const char* name) {
  CK(cudaFuncSetAttribute(bulk_tile<S, I>, cudaFuncAttributeMaxDynamicSharedMemorySize, S));
  const long tiles = bytes / S;
  double ms = time_ms(b, [&] { bulk_tile<S, I><<<tiles, 128, S>>>((char*)b.buf, b.idx, 1.0f); });
  report(name, bytes, ms);
}

template <int S, int N>
void run_ring(Bench& b, size_t bytes, int per_sm, const char* name) {
  CK(cudaFuncSetAttribute(ring_tile<S, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, S * N));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const long tiles = bytes / S;
  double ms = time_ms(b, [&] { ring_tile<S, N><<<sms * per_sm, 128, S * N>>>((char*)b.buf, tiles, 1.0f); });
  report(name, bytes, ms);
}

int main() {
  Bench b;
  const size_t max_bytes = 1u << 30;
  CK(cudaMalloc(&b.buf, max_bytes));
  CK(cudaMalloc(&b.src, max_bytes));
  CK(cudaMalloc(&b.flush, b.flush_bytes));
  CK(cudaMalloc(&b.idx, (max_bytes / 4096) * sizeof(int)));
  {
    std::vector<int> id(max_bytes / 4096);
    for (size_t i = 0; i < id.size(); ++i) id[i] = (int)i;
    CK(cudaMemcpy(b.idx, id.data(), id.size() * sizeof(int), cudaMemcpyHostToDevice));
  }
  CK(cudaMemset(b.buf, 0, max_bytes));
  CK(cudaMemset(b.src, 0, max_bytes));
  CK(cudaEventCreate(&b.e0));
  CK(cudaEventCreate(&b.e1));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);

  {
    double ms = time_ms(b, [&] { CK(cudaMemcpyAsync(b.buf, b.src, max_bytes, cudaMemcpyDeviceToDevice)); }, 11);
    g_copy_tbps = 2.0 * max_bytes / (ms * 1e-3) / 1e12;
    report("memcpy 1 GiB (the bench's ceiling)", max_bytes, ms);
  }
  // D2: N = 64, HV = 32, K = V = 128 fp32 states; D3: N = 256.
  const size_t sizes[] = {134217728ul, 536870912ul};
  for (size_t bytes : sizes) {
    printf("-- %zu bytes in place (read + write)\n", bytes);
    report("memcpy (src != dst)", bytes,
           time_ms(b, [&] { CK(cudaMemcpyAsync(b.buf, b.src, bytes, cudaMemcpyDeviceToDevice)); }));
    run_reg<128, 8, 1, false>(b, bytes, "reg 128t x 8 f4 (16 KB)");
    run_reg<128, 8, 1, true>(b, bytes, "reg 128t x 8 f4 (16 KB) idx");
    run_reg<128, 8, 4, false>(b, bytes, "reg 128t x 8 f4 (16 KB) lb4");
    run_reg<128, 16, 1, false>(b, bytes, "reg 128t x 16 f4 (32 KB)");
    run_reg<256, 8, 1, false>(b, bytes, "reg 256t x 8 f4 (32 KB)");
    run_reg<128, 4, 1, false>(b, bytes, "reg 128t x 4 f4 (8 KB)");
    run_bulk<16384, false>(b, bytes, "bulk 16 KB");
    run_bulk<16384, true>(b, bytes, "bulk 16 KB idx");
    run_bulk<32768, false>(b, bytes, "bulk 32 KB");
    run_bulk<65536, false>(b, bytes, "bulk 64 KB");
    run_ring<16384, 4>(b, bytes, 2, "ring 16 KB x 4, 2/SM");
    run_ring<16384, 6>(b, bytes, 2, "ring 16 KB x 6, 2/SM");
    run_ring<32768, 3>(b, bytes, 2, "ring 32 KB x 3, 2/SM");
    run_ring<16384, 12>(b, bytes, 1, "ring 16 KB x 12, 1/SM");
  }
  return 0;
}
