// CUDA and HIP spellings in one place (in the manner of jaxlib's gpu vendor.h), so handlers and
// kernels are written once for both: the types of the 16-bit floats, the runtime calls the
// launchers make, and the warp intrinsics the kernels use. CUDA builds run and are tested on
// GPUs; the ROCm build (the portable kernels) is compiled in CI and has not run on AMD hardware
// (kernels that use inline PTX - mma.sync, wgmma, cp.async, TMA - are CUDA-only).
#pragma once

#include <cstdint>

#if defined(__HIPCC__) || defined(JAXPAGED_HIP)
#define JAXPAGED_VENDOR_HIP 1
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>
#else  // ROCm before 5.5 (Debian's 5.2): the older bfloat16 class
#include <hip/hip_bfloat16.h>
#define JAXPAGED_HIP_OLD_BF16 1
#endif
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

namespace jaxpaged {

// 16-bit float element types (kernel template arguments) and the bf16 pair.
#if defined(JAXPAGED_HIP_OLD_BF16)
using gpu_half = __half;
using gpu_bf16 = hip_bfloat16;
struct gpu_bf16x2 {  // no bf16 pair type in the older API
  hip_bfloat16 x, y;
};
using gpuStream_t = hipStream_t;
#elif defined(JAXPAGED_VENDOR_HIP)
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
// The vendor's names, then each call written once.
#if defined(JAXPAGED_VENDOR_HIP)
using Error = hipError_t;
using FuncAttributes = hipFuncAttributes;
constexpr Error kSuccess = hipSuccess;
constexpr auto kAttrSmCount = hipDeviceAttributeMultiprocessorCount;
constexpr auto kAttrCcMajor = hipDeviceAttributeComputeCapabilityMajor;
constexpr auto kAttrMemClockKhz = hipDeviceAttributeMemoryClockRate;
constexpr auto kAttrMemBusBits = hipDeviceAttributeMemoryBusWidth;
constexpr auto kFuncAttrMaxDynamicSmem = hipFuncAttributeMaxDynamicSharedMemorySize;
#define JP_GPU_RT(name) hip##name
#else
using Error = cudaError_t;
using FuncAttributes = cudaFuncAttributes;
constexpr Error kSuccess = cudaSuccess;
constexpr auto kAttrSmCount = cudaDevAttrMultiProcessorCount;
constexpr auto kAttrCcMajor = cudaDevAttrComputeCapabilityMajor;
constexpr auto kAttrMemClockKhz = cudaDevAttrMemoryClockRate;
constexpr auto kAttrMemBusBits = cudaDevAttrGlobalMemoryBusWidth;
constexpr auto kFuncAttrMaxDynamicSmem = cudaFuncAttributeMaxDynamicSharedMemorySize;
#define JP_GPU_RT(name) cuda##name
#endif

inline Error last_error() { return JP_GPU_RT(GetLastError)(); }
inline const char* error_string(Error e) { return JP_GPU_RT(GetErrorString)(e); }
inline Error current_device(int* device) { return JP_GPU_RT(GetDevice)(device); }
inline Error device_count(int* count) { return JP_GPU_RT(GetDeviceCount)(count); }
inline Error sm_count(int* count, int device) { return JP_GPU_RT(DeviceGetAttribute)(count, kAttrSmCount, device); }
inline Error memory_clock_khz(int* khz, int device) { return JP_GPU_RT(DeviceGetAttribute)(khz, kAttrMemClockKhz, device); }
inline Error memory_bus_bits(int* bits, int device) { return JP_GPU_RT(DeviceGetAttribute)(bits, kAttrMemBusBits, device); }
inline Error compute_capability_major(int* major, int device) {
  return JP_GPU_RT(DeviceGetAttribute)(major, kAttrCcMajor, device);
}
inline Error memset_async(void* dst, int value, size_t bytes, gpuStream_t stream) {
  return JP_GPU_RT(MemsetAsync)(dst, value, bytes, stream);
}
inline Error memcpy_d2d_async(void* dst, const void* src, size_t bytes, gpuStream_t stream) {
  return JP_GPU_RT(MemcpyAsync)(dst, src, bytes, JP_GPU_RT(MemcpyDeviceToDevice), stream);
}
// Dynamic shared memory above 48 KiB must be opted into per kernel.
template <typename Kernel>
Error allow_dynamic_smem(Kernel kernel, int bytes) {
  return JP_GPU_RT(FuncSetAttribute)(reinterpret_cast<const void*>(kernel), kFuncAttrMaxDynamicSmem, bytes);
}
template <typename Kernel>
Error blocks_per_sm(int* blocks, Kernel kernel, int threads, size_t smem_bytes) {
  return JP_GPU_RT(OccupancyMaxActiveBlocksPerMultiprocessor)(blocks, kernel, threads, smem_bytes);
}
// The architecture (major * 10 + minor) of the binary the runtime picked for `kernel` on the
// current device; an error when the build carries no image that runs there.
template <typename Kernel>
Error kernel_binary_version(int* version, Kernel kernel) {
  FuncAttributes attr{};
  const Error e = JP_GPU_RT(FuncGetAttributes)(&attr, reinterpret_cast<const void*>(kernel));
  *version = attr.binaryVersion;
  return e;
}
// The PTX version (major * 10 + minor) `kernel`'s code was compiled from on the current device:
// what its inline PTX could use (griddepcontrol needs 90).
template <typename Kernel>
Error kernel_ptx_version(int* version, Kernel kernel) {
  FuncAttributes attr{};
  const Error e = JP_GPU_RT(FuncGetAttributes)(&attr, reinterpret_cast<const void*>(kernel));
  *version = attr.ptxVersion;
  return e;
}
// A kernel parameter read in place from the parameter space, also where it is indexed at run time
// (no per-thread copy); on ROCm kernel arguments are read from memory anyway.
#if defined(JAXPAGED_VENDOR_HIP)
#define JP_GRID_CONSTANT
#else
#define JP_GRID_CONSTANT __grid_constant__
#endif

// Launches kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent launch
// (Hopper and later, CUDA 12.3+): it may start before the kernel ahead of it in the stream has
// finished, once that one's blocks have all run griddepcontrol.launch_dependents or exited, so its
// launch overlaps the other's tail. The kernel must run pdl_wait() (common/pdl.cuh) before it
// touches anything an earlier kernel writes or reads, and its code must be compiled for sm_90 or
// later (else that wait is compiled out: launch_chained in common/gpu_launch.h checks). `dependent`
// false, or a ROCm build: a plain launch; so is a dependent launch the runtime refuses as not
// supported.
#if defined(__CUDACC__) || defined(__HIPCC__)
template <typename... KArgs, typename... Args>
Error launch_maybe_dependent(bool dependent, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                             gpuStream_t stream, Args&&... args) {
#if defined(JAXPAGED_VENDOR_HIP)
  (void)dependent;
  hipLaunchKernelGGL(kernel, grid, block, smem, stream, static_cast<KArgs>(args)...);
  return hipGetLastError();
#else
  if (!dependent) {
    kernel<<<grid, block, smem, stream>>>(static_cast<KArgs>(args)...);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, static_cast<KArgs>(args)...);
  if (err != cudaErrorNotSupported) return err;
  (void)cudaGetLastError();  // (cleared; the plain launch below reports its own)
  kernel<<<grid, block, smem, stream>>>(static_cast<KArgs>(args)...);
  return cudaGetLastError();
#endif
}
#endif
#undef JP_GPU_RT

// ---------------------------------------------------------------- warp intrinsics (device)
// The kernels assume 32-lane warps (NVIDIA; AMD's RDNA in wave32 mode). On a wave-64 (CDNA) GPU
// each wavefront holds two such warps: the shuffles below pass width 32 and the ballot takes the
// caller's half, so every intrinsic here stays inside the caller's 32 lanes.
#if defined(__CUDACC__) || defined(__HIPCC__)
constexpr unsigned kFullMask = 0xffffffffu;
#if defined(JAXPAGED_VENDOR_HIP)
template <typename V>
__device__ __forceinline__ V shfl_xor(V v, int mask) { return __shfl_xor(v, mask, 32); }
template <typename V>
__device__ __forceinline__ V shfl_up(V v, int delta) { return __shfl_up(v, delta, 32); }
template <typename V>
__device__ __forceinline__ V shfl(V v, int src) { return __shfl(v, src, 32); }
// Bit i: lane i's predicate within the caller's 32-lane group. A wave-64 (CDNA) ballot covers the
// whole wavefront: lanes 32-63 take its upper word, so each 32-lane group sees its own lanes only.
__device__ __forceinline__ uint32_t ballot(bool pred) {
  return uint32_t(static_cast<unsigned long long>(__ballot(pred)) >> (__lane_id() & 32));
}
__device__ __forceinline__ bool any(bool pred) { return ballot(pred) != 0u; }  // (within the 32 lanes)
// A wavefront runs in lock step; the fences keep the compiler from moving shared-memory accesses
// across the call (what __syncwarp's memory ordering gives on NVIDIA).
__device__ __forceinline__ void syncwarp() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
#else
template <typename V>
__device__ __forceinline__ V shfl_xor(V v, int mask) { return __shfl_xor_sync(kFullMask, v, mask); }
template <typename V>
__device__ __forceinline__ V shfl_up(V v, int delta) { return __shfl_up_sync(kFullMask, v, delta); }
template <typename V>
__device__ __forceinline__ V shfl(V v, int src) { return __shfl_sync(kFullMask, v, src); }
__device__ __forceinline__ bool any(bool pred) { return __any_sync(kFullMask, pred) != 0; }
__device__ __forceinline__ uint32_t ballot(bool pred) { return __ballot_sync(kFullMask, pred); }
__device__ __forceinline__ void syncwarp() { __syncwarp(); }
#endif

// ---------------------------------------------------------------- bf16 conversions (device)
// ROCm before 5.5 has only the hip_bfloat16 class (conversions through its constructor and
// operator float); the others have CUDA's function names.
#if defined(JAXPAGED_HIP_OLD_BF16)
__device__ __forceinline__ float bf16_to_float(gpu_bf16 x) { return float(x); }
__device__ __forceinline__ gpu_bf16 float_to_bf16(float x) { return gpu_bf16(x); }
__device__ __forceinline__ gpu_bf16x2 floats_to_bf16x2(float lo, float hi) { return {gpu_bf16(lo), gpu_bf16(hi)}; }
#else
__device__ __forceinline__ float bf16_to_float(gpu_bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ gpu_bf16 float_to_bf16(float x) { return __float2bfloat16_rn(x); }
__device__ __forceinline__ gpu_bf16x2 floats_to_bf16x2(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
#endif
#endif

}  // namespace gpu
}  // namespace jaxpaged
