// Launcher of the merge of KV splits (combine_splits.cuh), shared by both ops; defined once in
// combine_splits.cu.
#pragma once

#include <cstdint>

#include "common/ffi_helpers.h"
#include "gpu_vendor.h"

namespace jaxpaged {

// Merges num_splits partial results per row (ws_out [splits][rows][dim] floats, ws_lse
// [splits][rows]) into out [rows][dim] (T) and lse [rows]. dependent: a programmatic dependent
// launch (dependent_launches(); the kernel waits for the one ahead before reading).
template <typename T>
ffi::Error launch_combine_splits(const float* ws_out, const float* ws_lse, int num_splits, int64_t rows,
                                 int dim, T* out, float* lse, gpuStream_t stream, bool dependent = false);

}  // namespace jaxpaged
