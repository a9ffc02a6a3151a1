// KDA² cp.async wrappers (sm_80 and later), shared by both kernel families: asynchronous global -> shared
// copies, their commit groups and the waits on them. The waits clobber memory, so the compiler keeps shared-memory
// reads of the copied data after them.
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

}  // namespace kda2
