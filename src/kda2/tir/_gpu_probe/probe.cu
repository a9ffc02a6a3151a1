
#ifdef __CUDACC_RTC__
  #include <cuda/std/cstdint>
  using cuda::std::uint8_t;
  using cuda::std::uint16_t;
  using cuda::std::uint32_t;
  using cuda::std::uint64_t;
  using cuda::std::int8_t;
  using cuda::std::int16_t;
  using cuda::std::int32_t;
  using cuda::std::int64_t;

  #include <cuda/std/type_traits>
  namespace std {
    using cuda::std::is_same;
    using cuda::std::is_same_v;
    using cuda::std::is_integral;
    using cuda::std::is_signed;
    using cuda::std::is_unsigned;
    using cuda::std::is_floating_point;
    using cuda::std::enable_if;
    using cuda::std::conditional;
  }

  // NVRTC uses asm/volatile instead of __asm__/__volatile__ (gcc extension).
  #ifndef __asm__
  #define __asm__ asm
  #endif
  #ifndef __volatile__
  #define __volatile__ volatile
  #endif
#else
  #include <cstdint>
  #include <type_traits>
  #include <cuda.h>
#endif

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 700)
#define __shfl_sync(mask, var, lane, width) \
        __shfl((var), (lane), (width))

#define __shfl_down_sync(mask, var, offset, width) \
        __shfl_down((var), (offset), (width))

#define __shfl_up_sync(mask, var, offset, width) \
        __shfl_up((var), (offset), (width))
#endif

#if (((__CUDACC_VER_MAJOR__ == 11) && (__CUDACC_VER_MINOR__ >= 4)) || \
     (__CUDACC_VER_MAJOR__ > 11))
#define TVM_ENABLE_L2_PREFETCH 1
#else
#define TVM_ENABLE_L2_PREFETCH 0
#endif

#ifdef _WIN32
  using uint = unsigned int;
  using uchar = unsigned char;
  using ushort = unsigned short;
  using int64_t = long long;
  using uint64_t = unsigned long long;
#else
  #define uint unsigned int
  #define uchar unsigned char
  #define ushort unsigned short
#endif

__forceinline__ __device__ void tvm_builtin_cuda_cta_sync() {
    __syncthreads();
}
extern "C" __global__ void __launch_bounds__(128) strided_before_kernel(float* __restrict__ state_ptr);
extern "C" __global__ void __launch_bounds__(128) strided_after_kernel(float* __restrict__ state_ptr);
extern "C" __global__ void __launch_bounds__(128) blocked_before_kernel(float* __restrict__ state_ptr);
extern "C" __global__ void __launch_bounds__(128) blocked_after_kernel(float* __restrict__ state_ptr);
extern "C" __global__ void __launch_bounds__(128) vpw2_before_kernel(float* __restrict__ state_ptr);
extern "C" __global__ void __launch_bounds__(128) vpw2_after_kernel(float* __restrict__ state_ptr);
extern "C" __global__ void __launch_bounds__(32) w1_before_kernel(float* __restrict__ state_ptr);
extern "C" __global__ void __launch_bounds__(32) w1_after_kernel(float* __restrict__ state_ptr);
extern "C" __global__ void __launch_bounds__(128) strided_before_kernel(float* __restrict__ state_ptr) {
  int cse_v1 = (((int)threadIdx.x) >> 5);
  int warp_id_in_cta = __shfl_sync((uint)4294967295, (((int)threadIdx.x) >> 5), 0, 32);
  int tx = ((int)threadIdx.x);
  __shared__ alignas(64) float sm_ptr[4096];
  alignas(64) float reg_ptr[32];
  int cse_v2 = (((int)threadIdx.x) * 4);
  for (int it = 0; it < 8; ++it) {
    int cse_v5 = ((it * 512) + (((int)threadIdx.x) * 4));
    *(float4*)(sm_ptr + ((it * 512) + (((int)threadIdx.x) * 4))) = *(float4*)(state_ptr + ((it * 512) + (((int)threadIdx.x) * 4)));
  }
  tvm_builtin_cuda_cta_sync();
  int cse_v6 = ((((int)threadIdx.x) & 31) * 32);
  int cse_v7 = ((((int)threadIdx.x) >> 5) * 8);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      int cse_v3 = (j * 4);
      *(float4*)(reg_ptr + ((i * 8) + (j * 4))) = *(float4*)(sm_ptr + ((((i * 1024) + ((((int)threadIdx.x) & 31) * 32)) + ((((int)threadIdx.x) >> 5) * 8)) + (j * 4)));
    }
  }
  asm volatile("" ::: "memory");  // probe only: keep the smem round trip
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    for (int j_1 = 0; j_1 < 2; ++j_1) {
      int cse_v4 = (j_1 * 4);
      *(float4*)(sm_ptr + ((((i_1 * 1024) + ((((int)threadIdx.x) & 31) * 32)) + ((((int)threadIdx.x) >> 5) * 8)) + (j_1 * 4))) = *(float4*)(reg_ptr + ((i_1 * 8) + (j_1 * 4)));
    }
  }
  tvm_builtin_cuda_cta_sync();
  for (int it_1 = 0; it_1 < 8; ++it_1) {
    int cse_v8 = ((it_1 * 512) + (((int)threadIdx.x) * 4));
    *(float4*)(state_ptr + ((it_1 * 512) + (((int)threadIdx.x) * 4))) = *(float4*)(sm_ptr + ((it_1 * 512) + (((int)threadIdx.x) * 4)));
  }
}

extern "C" __global__ void __launch_bounds__(128) strided_after_kernel(float* __restrict__ state_ptr) {
  int cse_v1 = (((int)threadIdx.x) >> 5);
  int warp_id_in_cta = __shfl_sync((uint)4294967295, (((int)threadIdx.x) >> 5), 0, 32);
  int tx = ((int)threadIdx.x);
  __shared__ alignas(64) float sm_ptr[4608];
  alignas(64) float reg_ptr[32];
  int cse_v2 = (((int)threadIdx.x) * 4);
  int cse_v5 = ((((int)threadIdx.x) >> 3) * 36);
  int cse_v6 = ((((int)threadIdx.x) & 7) * 4);
  for (int it = 0; it < 8; ++it) {
    *(float4*)(sm_ptr + (((it * 576) + ((((int)threadIdx.x) >> 3) * 36)) + ((((int)threadIdx.x) & 7) * 4))) = *(float4*)(state_ptr + ((it * 512) + (((int)threadIdx.x) * 4)));
  }
  tvm_builtin_cuda_cta_sync();
  int cse_v7 = ((((int)threadIdx.x) & 31) * 36);
  int cse_v8 = ((((int)threadIdx.x) >> 5) * 8);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      int cse_v3 = (j * 4);
      *(float4*)(reg_ptr + ((i * 8) + (j * 4))) = *(float4*)(sm_ptr + ((((i * 1152) + ((((int)threadIdx.x) & 31) * 36)) + ((((int)threadIdx.x) >> 5) * 8)) + (j * 4)));
    }
  }
  asm volatile("" ::: "memory");  // probe only: keep the smem round trip
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    for (int j_1 = 0; j_1 < 2; ++j_1) {
      int cse_v4 = (j_1 * 4);
      *(float4*)(sm_ptr + ((((i_1 * 1152) + ((((int)threadIdx.x) & 31) * 36)) + ((((int)threadIdx.x) >> 5) * 8)) + (j_1 * 4))) = *(float4*)(reg_ptr + ((i_1 * 8) + (j_1 * 4)));
    }
  }
  tvm_builtin_cuda_cta_sync();
  for (int it_1 = 0; it_1 < 8; ++it_1) {
    *(float4*)(state_ptr + ((it_1 * 512) + (((int)threadIdx.x) * 4))) = *(float4*)(sm_ptr + (((it_1 * 576) + ((((int)threadIdx.x) >> 3) * 36)) + ((((int)threadIdx.x) & 7) * 4)));
  }
}

extern "C" __global__ void __launch_bounds__(128) blocked_before_kernel(float* __restrict__ state_ptr) {
  int cse_v1 = (((int)threadIdx.x) >> 5);
  int warp_id_in_cta = __shfl_sync((uint)4294967295, (((int)threadIdx.x) >> 5), 0, 32);
  int tx = ((int)threadIdx.x);
  __shared__ alignas(64) float sm_ptr[4096];
  alignas(64) float reg_ptr[32];
  int cse_v2 = (((int)threadIdx.x) * 4);
  for (int it = 0; it < 8; ++it) {
    int cse_v5 = ((it * 512) + (((int)threadIdx.x) * 4));
    *(float4*)(sm_ptr + ((it * 512) + (((int)threadIdx.x) * 4))) = *(float4*)(state_ptr + ((it * 512) + (((int)threadIdx.x) * 4)));
  }
  tvm_builtin_cuda_cta_sync();
  int cse_v6 = ((((int)threadIdx.x) & 31) * 128);
  int cse_v7 = ((((int)threadIdx.x) >> 5) * 8);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      int cse_v3 = (j * 4);
      *(float4*)(reg_ptr + ((i * 8) + (j * 4))) = *(float4*)(sm_ptr + (((((((int)threadIdx.x) & 31) * 128) + (i * 32)) + ((((int)threadIdx.x) >> 5) * 8)) + (j * 4)));
    }
  }
  asm volatile("" ::: "memory");  // probe only: keep the smem round trip
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    for (int j_1 = 0; j_1 < 2; ++j_1) {
      int cse_v4 = (j_1 * 4);
      *(float4*)(sm_ptr + (((((((int)threadIdx.x) & 31) * 128) + (i_1 * 32)) + ((((int)threadIdx.x) >> 5) * 8)) + (j_1 * 4))) = *(float4*)(reg_ptr + ((i_1 * 8) + (j_1 * 4)));
    }
  }
  tvm_builtin_cuda_cta_sync();
  for (int it_1 = 0; it_1 < 8; ++it_1) {
    int cse_v8 = ((it_1 * 512) + (((int)threadIdx.x) * 4));
    *(float4*)(state_ptr + ((it_1 * 512) + (((int)threadIdx.x) * 4))) = *(float4*)(sm_ptr + ((it_1 * 512) + (((int)threadIdx.x) * 4)));
  }
}

extern "C" __global__ void __launch_bounds__(128) blocked_after_kernel(float* __restrict__ state_ptr) {
  int cse_v1 = (((int)threadIdx.x) >> 5);
  int warp_id_in_cta = __shfl_sync((uint)4294967295, (((int)threadIdx.x) >> 5), 0, 32);
  int tx = ((int)threadIdx.x);
  __shared__ alignas(64) float sm_ptr[4608];
  alignas(64) float reg_ptr[32];
  int cse_v2 = (((int)threadIdx.x) * 4);
  int cse_v5 = ((((int)threadIdx.x) >> 3) * 36);
  int cse_v6 = ((((int)threadIdx.x) & 7) * 4);
  for (int it = 0; it < 8; ++it) {
    *(float4*)(sm_ptr + (((it * 576) + ((((int)threadIdx.x) >> 3) * 36)) + ((((int)threadIdx.x) & 7) * 4))) = *(float4*)(state_ptr + ((it * 512) + (((int)threadIdx.x) * 4)));
  }
  tvm_builtin_cuda_cta_sync();
  int cse_v7 = ((((int)threadIdx.x) & 31) * 144);
  int cse_v8 = ((((int)threadIdx.x) >> 5) * 8);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      int cse_v3 = (j * 4);
      *(float4*)(reg_ptr + ((i * 8) + (j * 4))) = *(float4*)(sm_ptr + (((((((int)threadIdx.x) & 31) * 144) + (i * 36)) + ((((int)threadIdx.x) >> 5) * 8)) + (j * 4)));
    }
  }
  asm volatile("" ::: "memory");  // probe only: keep the smem round trip
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    for (int j_1 = 0; j_1 < 2; ++j_1) {
      int cse_v4 = (j_1 * 4);
      *(float4*)(sm_ptr + (((((((int)threadIdx.x) & 31) * 144) + (i_1 * 36)) + ((((int)threadIdx.x) >> 5) * 8)) + (j_1 * 4))) = *(float4*)(reg_ptr + ((i_1 * 8) + (j_1 * 4)));
    }
  }
  tvm_builtin_cuda_cta_sync();
  for (int it_1 = 0; it_1 < 8; ++it_1) {
    *(float4*)(state_ptr + ((it_1 * 512) + (((int)threadIdx.x) * 4))) = *(float4*)(sm_ptr + (((it_1 * 576) + ((((int)threadIdx.x) >> 3) * 36)) + ((((int)threadIdx.x) & 7) * 4)));
  }
}

extern "C" __global__ void __launch_bounds__(128) vpw2_before_kernel(float* __restrict__ state_ptr) {
  int cse_v1 = (((int)threadIdx.x) >> 5);
  int warp_id_in_cta = __shfl_sync((uint)4294967295, (((int)threadIdx.x) >> 5), 0, 32);
  int tx = ((int)threadIdx.x);
  __shared__ alignas(64) float sm_ptr[1024];
  alignas(64) float reg_ptr[8];
  int cse_v2 = (((int)threadIdx.x) * 4);
  for (int it = 0; it < 2; ++it) {
    int cse_v3 = ((it * 512) + (((int)threadIdx.x) * 4));
    *(float4*)(sm_ptr + ((it * 512) + (((int)threadIdx.x) * 4))) = *(float4*)(state_ptr + ((it * 512) + (((int)threadIdx.x) * 4)));
  }
  tvm_builtin_cuda_cta_sync();
  int cse_v4 = ((((int)threadIdx.x) & 31) * 8);
  int cse_v5 = ((((int)threadIdx.x) >> 5) * 2);
  for (int i = 0; i < 4; ++i) {
    *(float2*)(reg_ptr + (i * 2)) = *(float2*)(sm_ptr + (((i * 256) + ((((int)threadIdx.x) & 31) * 8)) + ((((int)threadIdx.x) >> 5) * 2)));
  }
  asm volatile("" ::: "memory");  // probe only: keep the smem round trip
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    *(float2*)(sm_ptr + (((i_1 * 256) + ((((int)threadIdx.x) & 31) * 8)) + ((((int)threadIdx.x) >> 5) * 2))) = *(float2*)(reg_ptr + (i_1 * 2));
  }
  tvm_builtin_cuda_cta_sync();
  for (int it_1 = 0; it_1 < 2; ++it_1) {
    int cse_v6 = ((it_1 * 512) + (((int)threadIdx.x) * 4));
    *(float4*)(state_ptr + ((it_1 * 512) + (((int)threadIdx.x) * 4))) = *(float4*)(sm_ptr + ((it_1 * 512) + (((int)threadIdx.x) * 4)));
  }
}

extern "C" __global__ void __launch_bounds__(128) vpw2_after_kernel(float* __restrict__ state_ptr) {
  int cse_v1 = (((int)threadIdx.x) >> 5);
  int warp_id_in_cta = __shfl_sync((uint)4294967295, (((int)threadIdx.x) >> 5), 0, 32);
  int tx = ((int)threadIdx.x);
  __shared__ alignas(64) float sm_ptr[1536];
  alignas(64) float reg_ptr[8];
  int cse_v2 = (((int)threadIdx.x) * 4);
  int cse_v3 = ((((int)threadIdx.x) >> 1) * 12);
  int cse_v4 = ((((int)threadIdx.x) & 1) * 4);
  for (int it = 0; it < 2; ++it) {
    *(float4*)(sm_ptr + (((it * 768) + ((((int)threadIdx.x) >> 1) * 12)) + ((((int)threadIdx.x) & 1) * 4))) = *(float4*)(state_ptr + ((it * 512) + (((int)threadIdx.x) * 4)));
  }
  tvm_builtin_cuda_cta_sync();
  int cse_v5 = ((((int)threadIdx.x) & 31) * 12);
  int cse_v6 = ((((int)threadIdx.x) >> 5) * 2);
  for (int i = 0; i < 4; ++i) {
    *(float2*)(reg_ptr + (i * 2)) = *(float2*)(sm_ptr + (((i * 384) + ((((int)threadIdx.x) & 31) * 12)) + ((((int)threadIdx.x) >> 5) * 2)));
  }
  asm volatile("" ::: "memory");  // probe only: keep the smem round trip
  for (int i_1 = 0; i_1 < 4; ++i_1) {
    *(float2*)(sm_ptr + (((i_1 * 384) + ((((int)threadIdx.x) & 31) * 12)) + ((((int)threadIdx.x) >> 5) * 2))) = *(float2*)(reg_ptr + (i_1 * 2));
  }
  tvm_builtin_cuda_cta_sync();
  for (int it_1 = 0; it_1 < 2; ++it_1) {
    *(float4*)(state_ptr + ((it_1 * 512) + (((int)threadIdx.x) * 4))) = *(float4*)(sm_ptr + (((it_1 * 768) + ((((int)threadIdx.x) >> 1) * 12)) + ((((int)threadIdx.x) & 1) * 4)));
  }
}

extern "C" __global__ void __launch_bounds__(32) w1_before_kernel(float* __restrict__ state_ptr) {
  int warp_id_in_cta = __shfl_sync((uint)4294967295, 0, 0, 32);
  int tx = ((int)threadIdx.x);
  __shared__ alignas(64) float sm_ptr[1024];
  alignas(64) float reg_ptr[32];
  int cse_v1 = (((int)threadIdx.x) * 4);
  for (int it = 0; it < 8; ++it) {
    int cse_v5 = ((it * 128) + (((int)threadIdx.x) * 4));
    *(float4*)(sm_ptr + ((it * 128) + (((int)threadIdx.x) * 4))) = *(float4*)(state_ptr + ((it * 128) + (((int)threadIdx.x) * 4)));
  }
  tvm_builtin_cuda_cta_sync();
  int cse_v2 = (((int)threadIdx.x) * 16);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      int cse_v3 = (j * 4);
      *(float4*)(reg_ptr + ((i * 16) + (j * 4))) = *(float4*)(sm_ptr + (((i * 512) + (((int)threadIdx.x) * 16)) + (j * 4)));
    }
  }
  asm volatile("" ::: "memory");  // probe only: keep the smem round trip
  for (int i_1 = 0; i_1 < 2; ++i_1) {
    for (int j_1 = 0; j_1 < 4; ++j_1) {
      int cse_v4 = (j_1 * 4);
      *(float4*)(sm_ptr + (((i_1 * 512) + (((int)threadIdx.x) * 16)) + (j_1 * 4))) = *(float4*)(reg_ptr + ((i_1 * 16) + (j_1 * 4)));
    }
  }
  tvm_builtin_cuda_cta_sync();
  for (int it_1 = 0; it_1 < 8; ++it_1) {
    int cse_v6 = ((it_1 * 128) + (((int)threadIdx.x) * 4));
    *(float4*)(state_ptr + ((it_1 * 128) + (((int)threadIdx.x) * 4))) = *(float4*)(sm_ptr + ((it_1 * 128) + (((int)threadIdx.x) * 4)));
  }
}

extern "C" __global__ void __launch_bounds__(32) w1_after_kernel(float* __restrict__ state_ptr) {
  int warp_id_in_cta = __shfl_sync((uint)4294967295, 0, 0, 32);
  int tx = ((int)threadIdx.x);
  __shared__ alignas(64) float sm_ptr[1280];
  alignas(64) float reg_ptr[32];
  int cse_v1 = (((int)threadIdx.x) * 4);
  int cse_v5 = ((((int)threadIdx.x) >> 2) * 20);
  int cse_v6 = ((((int)threadIdx.x) & 3) * 4);
  for (int it = 0; it < 8; ++it) {
    *(float4*)(sm_ptr + (((it * 160) + ((((int)threadIdx.x) >> 2) * 20)) + ((((int)threadIdx.x) & 3) * 4))) = *(float4*)(state_ptr + ((it * 128) + (((int)threadIdx.x) * 4)));
  }
  tvm_builtin_cuda_cta_sync();
  int cse_v2 = (((int)threadIdx.x) * 20);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      int cse_v3 = (j * 4);
      *(float4*)(reg_ptr + ((i * 16) + (j * 4))) = *(float4*)(sm_ptr + (((i * 640) + (((int)threadIdx.x) * 20)) + (j * 4)));
    }
  }
  asm volatile("" ::: "memory");  // probe only: keep the smem round trip
  for (int i_1 = 0; i_1 < 2; ++i_1) {
    for (int j_1 = 0; j_1 < 4; ++j_1) {
      int cse_v4 = (j_1 * 4);
      *(float4*)(sm_ptr + (((i_1 * 640) + (((int)threadIdx.x) * 20)) + (j_1 * 4))) = *(float4*)(reg_ptr + ((i_1 * 16) + (j_1 * 4)));
    }
  }
  tvm_builtin_cuda_cta_sync();
  for (int it_1 = 0; it_1 < 8; ++it_1) {
    *(float4*)(state_ptr + ((it_1 * 128) + (((int)threadIdx.x) * 4))) = *(float4*)(sm_ptr + (((it_1 * 160) + ((((int)threadIdx.x) >> 2) * 20)) + ((((int)threadIdx.x) & 3) * 4)));
  }
}


#undef uint
#include <cstdio>
int main() {
  float* d; cudaMalloc(&d, 256*256*4); cudaMemset(d, 0, 256*256*4);
  strided_before_kernel<<<1, 128>>>(d);
  strided_after_kernel<<<1, 128>>>(d);
  blocked_before_kernel<<<1, 128>>>(d);
  blocked_after_kernel<<<1, 128>>>(d);
  vpw2_before_kernel<<<1, 128>>>(d);
  vpw2_after_kernel<<<1, 128>>>(d);
  w1_before_kernel<<<1, 32>>>(d);
  w1_after_kernel<<<1, 32>>>(d);
  cudaError_t e = cudaDeviceSynchronize(); printf("%s\n", cudaGetErrorString(e)); return e != cudaSuccess;
}
