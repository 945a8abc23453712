// Host-side helpers for the GPU handlers: error conversion and the device's SM count.
#pragma once

#include <string>

#include "common/ffi_helpers.h"
#include "gpu_vendor.h"

namespace jaxpaged {

inline ffi::Error last_launch_error(const char* what) {
  const gpuError_t err = gpuGetLastError();
  if (err == gpuSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxpaged: launching ") + what + " failed: " +
                              gpuGetErrorString(err));
}

// SM count of the current device. A plain attribute query: allowed during graph capture.
inline int sm_count() {
  int device = 0, count = 0;
  if (gpuGetDevice(&device) != gpuSuccess ||
      gpuDeviceGetAttribute(&count, gpuDevAttrMultiProcessorCount, device) != gpuSuccess) {
    return 108;  // a conservative A100-sized guess; only the split heuristic uses it
  }
  return count;
}

// How many KV splits to launch (flash-decoding), up to `cap` (the workspace, sized by
// jaxpaged._primitive.kv_split_cap) and at most one split per `min_keys` keys. The grid runs in
// waves of `resident` blocks (SMs x blocks per SM); each wave lasts as long as one block's keys
// plus a fixed per-block cost (query load, pipeline fill and drain, the partial result and its
// share of the merge) worth about `overhead_keys` keys. Pick the count with the least modelled
// time, waves x (keys per split + overhead); ties go to fewer splits.
// (Until session 5 this picked the fullest waves, which on 64 blocks x 32K keys chose 33 splits in
// 8 waves of 1K-key blocks over 4 splits in one wave of 8K-key blocks: slower, see NOTES.md.)
inline int choose_kv_splits(int64_t blocks_without_split, int cap, int64_t max_keys, int min_keys,
                            int64_t resident, int64_t overhead_keys = 256) {
  const int64_t by_keys = (max_keys + min_keys - 1) / min_keys;
  const int64_t limit = cap < by_keys ? cap : by_keys;
  auto cost = [&](int64_t s) {
    const int64_t waves = (blocks_without_split * s + resident - 1) / resident;
    return waves * ((max_keys + s - 1) / s + overhead_keys);
  };
  int64_t best = 1;
  for (int64_t s = 2; s <= limit; ++s) {
    if (cost(s) < cost(best)) best = s;
  }
  return int(best);
}

// log2 of a power-of-two page size: kernels find a key's page with j >> shift.
inline int page_shift_of(int64_t page_size) {
  int shift = 0;
  while ((int64_t(1) << shift) < page_size) ++shift;
  return shift;
}

// Blocks of `kernel` that fit on the whole GPU at once.
template <typename Kernel>
int64_t resident_blocks(Kernel kernel, int threads, size_t smem_bytes) {
  int per_sm = 1;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes) != gpuSuccess ||
      per_sm < 1) {
    per_sm = 1;
  }
  return int64_t(per_sm) * sm_count();
}

}  // namespace jaxpaged
