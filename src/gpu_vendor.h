// CUDA and HIP spellings in one place (in the manner of jaxlib's gpu vendor.h), so handlers and
// kernels are written once for both: the types of the 16-bit floats, the runtime calls the
// launchers make, and the warp intrinsics the kernels use. Only CUDA is built and tested today;
// the HIP side names what a ROCm build needs (kernels that use inline PTX - mma.sync, wgmma,
// cp.async, TMA - are CUDA-only and need their own HIP counterparts).
#pragma once

#if defined(__HIPCC__) || defined(JAXPAGED_HIP)
#define JAXPAGED_VENDOR_HIP 1
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

namespace jaxpaged {

// 16-bit float element types (kernel template arguments) and the bf16 pair.
#if defined(JAXPAGED_VENDOR_HIP)
using gpu_half = __half;
using gpu_bf16 = __hip_bfloat16;
using gpu_bf16x2 = __hip_bfloat162;
using gpuStream_t = hipStream_t;
#else
using gpu_half = __half;
using gpu_bf16 = __nv_bfloat16;
using gpu_bf16x2 = __nv_bfloat162;
using gpuStream_t = cudaStream_t;
#endif

namespace gpu {

// ---------------------------------------------------------------- runtime (host)
#if defined(JAXPAGED_VENDOR_HIP)
using Error = hipError_t;
constexpr Error kSuccess = hipSuccess;
inline Error last_error() { return hipGetLastError(); }
inline const char* error_string(Error e) { return hipGetErrorString(e); }
inline Error current_device(int* device) { return hipGetDevice(device); }
inline Error device_count(int* count) { return hipGetDeviceCount(count); }
inline Error sm_count(int* count, int device) {
  return hipDeviceGetAttribute(count, hipDeviceAttributeMultiprocessorCount, device);
}
inline Error compute_capability_major(int* major, int device) {
  return hipDeviceGetAttribute(major, hipDeviceAttributeComputeCapabilityMajor, device);
}
template <typename Kernel>
Error allow_dynamic_smem(Kernel kernel, int bytes) {
  return hipFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                             hipFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
template <typename Kernel>
Error blocks_per_sm(int* blocks, Kernel kernel, int threads, size_t smem_bytes) {
  return hipOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, threads, smem_bytes);
}
// The architecture (major * 10 + minor) of the binary the runtime picked for `kernel` on the
// current device; an error when the build carries no image that runs there.
template <typename Kernel>
Error kernel_binary_version(int* version, Kernel kernel) {
  hipFuncAttributes attr{};
  const Error e = hipFuncGetAttributes(&attr, reinterpret_cast<const void*>(kernel));
  *version = attr.binaryVersion;
  return e;
}
#else
using Error = cudaError_t;
constexpr Error kSuccess = cudaSuccess;
inline Error last_error() { return cudaGetLastError(); }
inline const char* error_string(Error e) { return cudaGetErrorString(e); }
inline Error current_device(int* device) { return cudaGetDevice(device); }
inline Error device_count(int* count) { return cudaGetDeviceCount(count); }
inline Error sm_count(int* count, int device) {
  return cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, device);
}
inline Error compute_capability_major(int* major, int device) {
  return cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device);
}
template <typename Kernel>
Error allow_dynamic_smem(Kernel kernel, int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
template <typename Kernel>
Error blocks_per_sm(int* blocks, Kernel kernel, int threads, size_t smem_bytes) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, threads, smem_bytes);
}
template <typename Kernel>
Error kernel_binary_version(int* version, Kernel kernel) {
  cudaFuncAttributes attr{};
  const Error e = cudaFuncGetAttributes(&attr, kernel);
  *version = attr.binaryVersion;
  return e;
}
#endif

// ---------------------------------------------------------------- warp intrinsics (device)
// The kernels assume 32-lane warps (NVIDIA; AMD's RDNA in wave32 mode). A wave-64 (CDNA) port
// passes width 32 here, or gets kernels of its own.
#if defined(__CUDACC__) || defined(__HIPCC__)
constexpr unsigned kFullMask = 0xffffffffu;
#if defined(JAXPAGED_VENDOR_HIP)
template <typename V>
__device__ __forceinline__ V shfl_xor(V v, int mask) { return __shfl_xor(v, mask, 32); }
template <typename V>
__device__ __forceinline__ V shfl_up(V v, int delta) { return __shfl_up(v, delta, 32); }
template <typename V>
__device__ __forceinline__ V shfl(V v, int src) { return __shfl(v, src, 32); }
__device__ __forceinline__ bool any(bool pred) { return __any(pred); }
__device__ __forceinline__ void syncwarp() {}
#else
template <typename V>
__device__ __forceinline__ V shfl_xor(V v, int mask) { return __shfl_xor_sync(kFullMask, v, mask); }
template <typename V>
__device__ __forceinline__ V shfl_up(V v, int delta) { return __shfl_up_sync(kFullMask, v, delta); }
template <typename V>
__device__ __forceinline__ V shfl(V v, int src) { return __shfl_sync(kFullMask, v, src); }
__device__ __forceinline__ bool any(bool pred) { return __any_sync(kFullMask, pred) != 0; }
__device__ __forceinline__ void syncwarp() { gpu::syncwarp(); }
#endif
#endif

}  // namespace gpu
}  // namespace jaxpaged
