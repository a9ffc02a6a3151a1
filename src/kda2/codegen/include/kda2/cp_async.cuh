// KDA² asynchronous copy wrappers, shared by both kernel families: cp.async (sm_80 and later) global -> shared
// copies, their commit groups and the waits on them; sm_90 bulk copies both ways, on an mbarrier (in) and bulk
// groups (out). The waits clobber memory, so the compiler keeps shared-memory reads of the copied data after them.
#pragma once
#include <stdint.h>

namespace kda2 {

// cp.async (sm_80 and later): a global -> shared copy that holds no register and makes no thread wait at the
// issue, so a CTA keeps its occupancy while the copies overlap its compute and stores: every token's inputs in
// flight with the state loads (Kernel::preload_issue), the next tile's state in the persistent kernels.
// BYTES from gmem + OFF bytes. OFF is an immediate of the instruction: the copies of a tile share one address
// register (as a pointer operand per copy, ptxas kept a 64-bit register for each, 32 in all). 16-byte pieces
// bypass L1 (.cg: each byte is read once per CTA); 4- and 8-byte ones can only go through it; a 2-byte piece (a
// lone bf16 state element) goes through a register instead, which is correct but waits for its load.
// No .L2::cache_hint (evict-first policy): with it, ptxas (CUDA 13.0, sm_90a) encoded the 4-byte copies of the
// lane_cols 2 bf16-state entries in the [Ra+URb] form with descriptor and offset uniform registers (UR0, UR1)
// that the kernel never writes, after overwriting the policy's low word (UMOV UR4, URZ; UMOV UR4, UR14): the
// suspected cause of the H200 'illegal instruction' (2026-12-01). The plain form takes the default descriptor.
template <int BYTES, long OFF = 0>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1+%2], 16;\n" ::"r"(s), "l"(gmem), "n"(OFF) : "memory");
  } else if constexpr (BYTES == 8 || BYTES == 4) {
    asm volatile("cp.async.ca.shared.global [%0], [%1+%2], %3;\n" ::"r"(s), "l"(gmem), "n"(OFF), "n"(BYTES) : "memory");
  } else {
    static_assert(BYTES == 2, "pieces of 2, 4, 8 or 16 bytes");
    *reinterpret_cast<unsigned short*>(smem) =
        __ldcs(reinterpret_cast<const unsigned short*>(static_cast<const char*>(gmem) + OFF));
  }
}

// The 32-bit shared-memory address of p (the form the async copies and the tensor-core operands take).
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes to a shared-memory address (the tensor-core kernels keep shared addresses as 32-bit words), past L1.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// Closes the copies this thread issued since the last commit into one group (an empty group completes at once).
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's most recent groups are still in flight; the rest have landed and are
// visible to this thread.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// Waits for every copy this thread issued, committed or not.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// sm_90 bulk-copy / mbarrier helpers (empty below sm_90, where the kernels never call them).
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n}\n" ::"r"(bar), "r"(parity) : "memory");
#endif
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
#endif
}
// A 3-D tensor-map box (coordinates c0 fastest) into shared memory, completing on `bar`; `map`: the generic address
// of a __grid_constant__ CUtensorMap kernel parameter.
__device__ __forceinline__ void tensor_load_3d(uint32_t dst, const void* map, int c0, int c1, int c2, uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
               ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
#endif
}
// The store side: shared memory to the box at (c0, c1, c2), in the current bulk group (bulk_commit / bulk_wait_read).
__device__ __forceinline__ void tensor_store_3d(const void* map, int c0, int c1, int c2, uint32_t src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n"
               ::"l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(src) : "memory");
#endif
}
// Shared -> global bulk copy (the store side), one bulk group per commit; bulk_wait_read<N>: at most N of this
// thread's groups still read their shared source (the source may be overwritten, or the CTA exit, after N = 0).
__device__ __forceinline__ void bulk_store(void* dst, uint32_t src, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
// Ordinary shared-memory stores become visible to the async proxy (bulk copies, wgmma operands) only after this
// fence and a barrier.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace kda2
