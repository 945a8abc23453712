// Block-wide prefix sum for the device-side schedulers (warp shuffles, then one pass over the
// warps' totals).
#pragma once

#include <cstdint>

#include "gpu_vendor.h"

namespace jaxpaged {

// Exclusive prefix sum of v over the block's kThreads threads (all must call); *total gets the sum of all.
template <int kThreads>
__device__ __forceinline__ int64_t block_exclusive_sum(int64_t v, int64_t* total) {
  __shared__ int64_t warp_sums[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t x = v;
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const int64_t y = gpu::shfl_up(x, off);
    if (lane >= off) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  int64_t before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) {
    before += w < warp ? warp_sums[w] : 0;
    all += warp_sums[w];
  }
  __syncthreads();  // warp_sums may be reused by the next call
  *total = all;
  return before + x - v;
}

}  // namespace jaxpaged
