// Shared-memory transaction barriers (mbarrier) and per-warpgroup register budgets: what a
// warp-specialized Hopper kernel needs so a loader warpgroup and compute warpgroups run
// decoupled (each waits only on the stage it needs instead of all meeting at __syncthreads).
//
// An mbarrier counts arrivals; when `count` have arrived its phase completes and flips. A waiter
// names the parity of the phase it waits for, so a ring of stages needs one bit of state per use:
// the k-th use of a stage waits for parity k & 1 on its "full" barrier, and its producer waits
// for parity (k & 1) ^ 1 on the "empty" one (a fresh barrier counts that phase as done).
#pragma once

#include <cstdint>

#include "common/sm80/mma.cuh"  // smem_addr

namespace jaxpaged {

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// A plain arrival; it releases this thread's earlier shared-memory writes to the waiters.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_addr(bar))
               : "memory");
}
// A plain arrival that also tells the barrier to expect `bytes` more from bulk (TMA) copies: its
// phase completes once the arrivals are in and those bytes have landed.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(
                   smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// An arrival made when all of this thread's earlier cp.async copies have landed (counted in the
// barrier's expected arrivals: "noinc").
__device__ __forceinline__ void mbar_arrive_on_cp_async(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      " .reg .pred done;\n"
      "wait_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// Whether the phase of that parity has completed, without waiting.
__device__ __forceinline__ bool mbar_test(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      " .reg .pred p;\n"
      " mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Moves registers between warpgroups of a block (all warps of a warpgroup must execute it):
// the loader gives most of its share to the compute warpgroups, which hold big accumulators.
template <int N>
__device__ __forceinline__ void warpgroup_regs_shrink() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void warpgroup_regs_grow() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
#endif

}  // namespace jaxpaged
