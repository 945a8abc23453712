// CUDA and HIP spellings in one place, so kernel sources are written once for both.
// Only CUDA is built and tested today; the HIP side names what a ROCm build would need.
#pragma once

#if defined(__HIPCC__) || defined(JAXPAGED_HIP)
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
using gpuStream_t = hipStream_t;
using gpuError_t = hipError_t;
using gpu_half = __half;
using gpu_bf16 = __hip_bfloat16;
using gpu_bf16x2 = __hip_bfloat162;
#define gpuSuccess hipSuccess
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuGetDevice hipGetDevice
#define gpuDeviceGetAttribute hipDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define JP_SHFL_XOR(v, mask) __shfl_xor((v), (mask), 32)
#define JP_SHFL_UP(v, delta) __shfl_up((v), (delta), 32)
#define JP_SHFL(v, src) __shfl((v), (src), 32)
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
using gpuStream_t = cudaStream_t;
using gpuError_t = cudaError_t;
using gpu_half = __half;
using gpu_bf16 = __nv_bfloat16;
using gpu_bf16x2 = __nv_bfloat162;
#define gpuSuccess cudaSuccess
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString
#define gpuGetDevice cudaGetDevice
#define gpuDeviceGetAttribute cudaDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount cudaDevAttrMultiProcessorCount
#define JP_SHFL_XOR(v, mask) __shfl_xor_sync(0xffffffffu, (v), (mask))
#define JP_SHFL_UP(v, delta) __shfl_up_sync(0xffffffffu, (v), (delta))
#define JP_SHFL(v, src) __shfl_sync(0xffffffffu, (v), (src))
#endif
