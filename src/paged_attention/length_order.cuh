// The longest-first order of pure paged decode's blocks, shared by the tile list (tile_schedule.cuh,
// one block for the whole call or a plan) and by the tile kernel's list-free path (tile_kernel.cuh,
// every block for itself): sequences go in kLengthBuckets buckets of KV length, longest first.
#pragma once

#include <cstdint>

#include "common/masking.h"  // clamp_kv_len
#include "gpu_vendor.h"

namespace jaxpaged {

constexpr int kLengthBuckets = 256;
// The most sequences whose lengths the tile kernel's blocks order themselves (tile_kernel.cuh).
constexpr int kOrderMaxSeqs = 1024;

// The bucket of a sequence of `len` keys when the longest has `top` (>= 1): 0 holds the longest.
__device__ __forceinline__ int length_bucket(int64_t len, int64_t top) {
  return int((top - len) * (kLengthBuckets - 1) / top);
}

}  // namespace jaxpaged
