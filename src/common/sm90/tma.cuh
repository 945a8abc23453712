// Tensor-memory-accelerator (TMA) copies on Hopper: one thread asks the copy engine for a whole
// box of a tensor (described by a CUtensorMap built on the host, see tensor_map_host.h), which
// lands in shared memory already in the 128-byte swizzle that wgmma reads, and reports its bytes
// to an mbarrier. Boxes that fall outside the tensor are zero-filled by the engine.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#include "common/sm80/mma.cuh"  // smem_addr

namespace jaxpaged {

// Copies the box at coordinates (c0, c1, c2) (innermost first) of the 3-d tensor `map` to `dst`
// (1024-byte aligned for the 128-byte swizzle); its bytes complete a transaction on `bar`.
// `map` must point at a __grid_constant__ kernel parameter (or global memory).
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
      : "memory");
}

// Copies `bytes` (a multiple of 16) contiguous bytes from global `src` to shared `dst` (both 16-byte
// aligned) through the copy engine; its bytes complete a transaction on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Brings a tensor map into the descriptor cache ahead of its first use.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace jaxpaged
