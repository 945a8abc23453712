// One macro so the same small helpers compile for the host (CPU handlers) and the device (kernels).
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define JP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define JP_HOST_DEVICE inline
#endif
