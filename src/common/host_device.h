// One macro so the same small helpers compile for the host (CPU handlers) and the device (kernels).
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define JP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define JP_HOST_DEVICE inline
#endif

#include <cstdint>
#include <cstring>

namespace jaxpaged {

// The float whose bits are `bits` (options travel to the kernels as int32 words).
JP_HOST_DEVICE float float_from_bits(int32_t bits) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __int_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

}  // namespace jaxpaged
