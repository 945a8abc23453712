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

// How many KV splits to launch: enough blocks for `waves` blocks per SM, no more than the
// workspace holds (cap, from jaxpaged._primitive.kv_split_cap) and no more than the keys allow.
inline int choose_kv_splits(int64_t blocks_without_split, int cap, int64_t max_keys, int min_keys,
                            int blocks_per_sm) {
  const int64_t target = int64_t(sm_count()) * blocks_per_sm;
  int64_t splits = (target + blocks_without_split - 1) / blocks_without_split;
  const int64_t by_keys = (max_keys + min_keys - 1) / min_keys;
  if (splits > by_keys) splits = by_keys;
  if (splits > cap) splits = cap;
  return splits < 1 ? 1 : int(splits);
}

}  // namespace jaxpaged
