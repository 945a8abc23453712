// The one translation unit of combine_splits_kernel (both ops' split merges).
#include "common/combine_splits.cuh"
#include "common/combine_splits.h"
#include "common/gpu_launch.h"

namespace jaxpaged {

template <typename T>
ffi::Error launch_combine_splits(const float* ws_out, const float* ws_lse, int num_splits, int64_t rows,
                                 int dim, T* out, float* lse, gpuStream_t stream) {
  combine_splits_kernel<T><<<unsigned(rows), kCombineThreads, 0, stream>>>(ws_out, ws_lse, num_splits, rows,
                                                                           dim, out, lse);
  return last_launch_error("combine_splits_kernel");
}

template ffi::Error launch_combine_splits<gpu_half>(const float*, const float*, int, int64_t, int, gpu_half*,
                                                    float*, gpuStream_t);
template ffi::Error launch_combine_splits<gpu_bf16>(const float*, const float*, int, int64_t, int, gpu_bf16*,
                                                    float*, gpuStream_t);

}  // namespace jaxpaged
