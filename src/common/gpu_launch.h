// Host-side helpers for the GPU handlers and launchers: error conversion, the device a call runs
// on, occupancy, and the one switch from an FFI dtype to the kernels' 16-bit element type.
#pragma once

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
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

// The result of a launch that returned its error (gpu::launch_maybe_dependent); the runtime's
// last-error state is read (and so cleared) as well.
inline ffi::Error launch_result(gpu::Error err, const char* what) {
  const gpu::Error last = gpu::last_error();
  if (err == gpu::kSuccess) err = last;
  if (err == gpu::kSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxpaged: launching ") + what + " failed: " + gpu::error_string(err));
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

// A value of a device computed once (by compute(), which must not return 0: 0 stands for "not yet")
// and kept in `table` for ordinals 0-63; other ordinals compute it on every call. Two threads may
// both compute it the first time; both store the same value.
template <typename V, typename F>
inline V per_device(std::atomic<V> (&table)[64], int device, F compute) {
  const bool slot = device >= 0 && device < 64;
  V v = slot ? table[device].load(std::memory_order_relaxed) : V(0);
  if (v == V(0)) {
    v = compute();
    if (slot) table[device].store(v, std::memory_order_relaxed);
  }
  return v;
}

// A device's peak memory bandwidth in MB/s (double data rate: 2 x clock x bus width), or 0 when
// the runtime does not say. Plain attribute queries (allowed during graph capture), made once per
// device: asked on every call, they cost host time (fp8 D = 256 per call measured 0.74 ms instead
// of 0.33 on the H200, CUDA 13, while the same calls inside a captured step were faster).
inline int64_t memory_mbps(int device) {
  static std::atomic<int64_t> cached[64];  // -1 not known, else MB/s
  const int64_t mbps = per_device(cached, device, [device]() -> int64_t {
    int khz = 0, bits = 0;
    const bool known = gpu::memory_clock_khz(&khz, device) == gpu::kSuccess &&
                       gpu::memory_bus_bits(&bits, device) == gpu::kSuccess && khz >= 1 && bits >= 1;
    const int64_t v = known ? int64_t(khz) * 2 * (bits / 8) / 1000 : 0;
    return v > 0 ? v : -1;
  });
  return mbps > 0 ? mbps : 0;
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

// Launch facts that never change for a (kernel, device, block shape): the occupancy and whether
// the dynamic shared memory opt-in was made. Remembered for the process, because the runtime
// queries behind them cost microseconds of host time on every call, which a single jitted call
// (no command buffer around it) pays each time. A few dozen entries at most (one per kernel
// instance and device used).
class LaunchFacts {
 public:
  using Key = std::tuple<const void*, int, int, size_t>;  // kernel, device, threads, smem bytes
  static bool find(const Key& key, int* value) {
    std::lock_guard<std::mutex> lock(mutex());
    const auto it = map().find(key);
    if (it == map().end()) return false;
    *value = it->second;
    return true;
  }
  static void remember(const Key& key, int value) {
    std::lock_guard<std::mutex> lock(mutex());
    map()[key] = value;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<Key, int>& map() {
    static std::map<Key, int> m;
    return m;
  }
};

// Blocks of `kernel` that fit on the whole current device at once.
template <typename Kernel>
int64_t resident_blocks(Kernel kernel, int threads, size_t smem_bytes) {
  const int device = current_device();
  const LaunchFacts::Key key{reinterpret_cast<const void*>(kernel), device, threads, smem_bytes};
  int per_sm = 0;
  if (!LaunchFacts::find(key, &per_sm)) {
    if (gpu::blocks_per_sm(&per_sm, kernel, threads, smem_bytes) != gpu::kSuccess || per_sm < 1) {
      per_sm = 1;  // (not remembered: asked again next time)
    } else {
      LaunchFacts::remember(key, per_sm);
    }
  }
  return int64_t(per_sm) * sm_count(device);
}

// Dynamic shared memory above 48 KiB must be opted into, once per kernel and device (the setting
// stays for the process); threads = -1 marks these entries apart from the occupancy ones.
template <typename Kernel>
ffi::Error allow_smem(Kernel kernel, size_t bytes, const char* what) {
  const LaunchFacts::Key key{reinterpret_cast<const void*>(kernel), current_device(), -1, bytes};
  int done = 0;
  if (LaunchFacts::find(key, &done)) return ffi::Error::Success();
  if (gpu::allow_dynamic_smem(kernel, int(bytes)) != gpu::kSuccess) return last_launch_error(what);
  LaunchFacts::remember(key, 1);
  return ffi::Error::Success();
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

// A switch that is on unless the environment sets `name` to exactly "0".
inline bool env_not_zero(const char* name) {
  const char* v = std::getenv(name);
  return !(v != nullptr && v[0] == '0' && v[1] == '\0');
}

// Whether this call's kernels may be chained as programmatic dependent launches (launch_chained):
// on GPUs of compute capability 9 and later (cached per device), unless JAXPAGED_PDL=0 (read once).
// Which launches are chained is each launcher's choice: the MLA Hopper path's attention kernel
// behind its own schedule kernel and the merge behind the attention kernel; the paged tile kernel
// behind its own tile schedule and the split merge behind the tile kernel. A call's first kernel
// launches plainly.
inline bool dependent_launches() {
#if defined(JAXPAGED_VENDOR_HIP)
  return false;
#else
  static const bool on = env_not_zero("JAXPAGED_PDL");
  if (!on) return false;
  static std::atomic<int> cached[64];  // 1 yes, 2 no
  const int device = current_device();
  return per_device(cached, device, [device] {
           int major = 0;
           return gpu::compute_capability_major(&major, device) == gpu::kSuccess && major >= 9 ? 1 : 2;
         }) == 1;
#endif
}

#if defined(__CUDACC__) || defined(__HIPCC__)
// Launches `kernel` (gpu::launch_maybe_dependent), as a dependent launch when `dependent` and the
// code the runtime runs for it on this device was compiled from PTX 9.0 or later: the
// architecture-neutral units also carry sm_80 code and compute_80 PTX, where pdl_wait() is
// compiled out, so a GPU that runs those (a later architecture JIT-compiling compute_80, or a
// build without sm_90a) gets a plain launch. The PTX version is looked up once per kernel and
// device (LaunchFacts).
template <typename... KArgs, typename... Args>
ffi::Error launch_chained(bool dependent, const char* what, void (*kernel)(KArgs...), dim3 grid, dim3 block,
                          size_t smem, gpuStream_t stream, Args&&... args) {
  if (dependent) {
    const LaunchFacts::Key key{reinterpret_cast<const void*>(kernel), current_device(), -1, 0};
    int ptx = 0;
    if (!LaunchFacts::find(key, &ptx)) {
      if (gpu::kernel_ptx_version(&ptx, kernel) != gpu::kSuccess) {
        (void)gpu::last_error();
        ptx = 0;
      }
      LaunchFacts::remember(key, ptx);
    }
    dependent = ptx >= 90;
  }
  return launch_result(gpu::launch_maybe_dependent(dependent, kernel, grid, block, smem, stream,
                                                   std::forward<Args>(args)...),
                       what);
}
#endif

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
