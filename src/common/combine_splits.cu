// The one translation unit of combine_splits_kernel (both ops' split merges).
#include "common/combine_splits.cuh"
#include "common/combine_splits.h"
#include "common/gpu_launch.h"

namespace jaxpaged {

template <typename T>
ffi::Error launch_combine_splits(const float* ws_out, const float* ws_lse, int num_splits, int64_t rows,
                                 int dim, T* out, float* lse, gpuStream_t stream, bool dependent) {
  return launch_chained(dependent, "combine_splits_kernel", combine_splits_kernel<T>, dim3(unsigned(rows)),
                        dim3(kCombineThreads), 0, stream, ws_out, ws_lse, num_splits, rows, dim, out, lse);
}

template ffi::Error launch_combine_splits<gpu_half>(const float*, const float*, int, int64_t, int, gpu_half*,
                                                    float*, gpuStream_t, bool);
template ffi::Error launch_combine_splits<gpu_bf16>(const float*, const float*, int, int64_t, int, gpu_bf16*,
                                                    float*, gpuStream_t, bool);

}  // namespace jaxpaged
