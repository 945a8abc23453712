// Host-side helpers for the GPU handlers and launchers: error conversion, the device a call runs
// on, occupancy, and the one switch from an FFI dtype to the kernels' 16-bit element type.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>

#include "common/ffi_helpers.h"
#include "common/kv_splits.h"
#include "gpu_vendor.h"

namespace jaxpaged {

inline ffi::Error last_launch_error(const char* what) {
  const gpu::Error err = gpu::last_error();
  if (err == gpu::kSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxpaged: launching ") + what + " failed: " +
                              gpu::error_string(err));
}

// The device the calling thread's launches go to (XLA sets it before calling a handler).
inline int current_device() {
  int device = 0;
  return gpu::current_device(&device) == gpu::kSuccess ? device : 0;
}

// SM count of a device. A plain attribute query: allowed during graph capture.
inline int sm_count(int device) {
  int count = 0;
  if (gpu::sm_count(&count, device) != gpu::kSuccess || count < 1) {
    return 108;  // a conservative A100-sized guess
  }
  return count;
}

// The devices a workspace must serve: `device`, or every visible one when it is negative
// (lowering without a known device assignment). Calls f(ordinal) for each.
template <typename F>
void for_each_device(int device, F&& f) {
  if (device >= 0) {
    f(device);
    return;
  }
  int count = 0;
  if (gpu::device_count(&count) != gpu::kSuccess || count < 1) count = 1;
  for (int d = 0; d < count; ++d) f(d);
}

// Blocks of `kernel` that fit on the whole current device at once.
template <typename Kernel>
int64_t resident_blocks(Kernel kernel, int threads, size_t smem_bytes) {
  int per_sm = 1;
  if (gpu::blocks_per_sm(&per_sm, kernel, threads, smem_bytes) != gpu::kSuccess || per_sm < 1) {
    per_sm = 1;
  }
  return int64_t(per_sm) * sm_count(current_device());
}

// Dynamic shared memory above 48 KiB must be opted into, per device, so on every launch.
template <typename Kernel>
ffi::Error allow_smem(Kernel kernel, size_t bytes, const char* what) {
  if (gpu::allow_dynamic_smem(kernel, int(bytes)) == gpu::kSuccess) return ffi::Error::Success();
  return last_launch_error(what);
}

// Whether the handlers run the portable kernels (CUDA cores, no inline assembly) instead of the
// architecture-specific ones: always in a ROCm build; in a CUDA build when the environment sets
// JAXPAGED_PORTABLE_KERNELS to anything but "" or "0" (read when a call is launched or captured),
// so the GPU suite can run that exact source on an NVIDIA GPU.
inline bool use_portable_kernels() {
#if defined(JAXPAGED_VENDOR_HIP)
  return true;
#else
  const char* v = std::getenv("JAXPAGED_PORTABLE_KERNELS");
  return v != nullptr && v[0] != '\0' && !(v[0] == '0' && v[1] == '\0');
#endif
}

// log2 of a power-of-two page size: kernels find a key's page with j >> shift.
inline int page_shift_of(int64_t page_size) {
  int shift = 0;
  while ((int64_t(1) << shift) < page_size) ++shift;
  return shift;
}

// Calls f(T{}) with T the kernels' element type for `dtype` (float16 or bfloat16); other dtypes
// are an error naming the op (the Python shape rule already rejects them on GPU).
template <typename F>
ffi::Error with_gpu_dtype(ffi::DataType dtype, const char* op, F&& f) {
  switch (dtype) {
    case ffi::DataType::F16: return std::forward<F>(f)(gpu_half{});
    case ffi::DataType::BF16: return std::forward<F>(f)(gpu_bf16{});
    default:
      return ffi::Error::InvalidArgument(std::string("jaxpaged: GPU ") + op +
                                         " supports float16 and bfloat16");
  }
}

}  // namespace jaxpaged
