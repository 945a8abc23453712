// Merges the partial results of KV splits (flash-decoding) into the final output and lse.
// Each split wrote, per output row, its normalised output (float) and its natural-log lse; the
// merge weights split k by exp(lse_k - max lse). An empty split has lse -inf and weight 0; a NaN
// lse (corrupt page id seen by that split) makes the whole row NaN.
#pragma once

#include "common/gpu_math.cuh"

namespace jaxpaged {

constexpr int kCombineThreads = 128;
constexpr int kMaxSplits = 64;

template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    combine_splits_kernel(const float* __restrict__ ws_out, const float* __restrict__ ws_lse,
                          int num_splits, int64_t num_rows, int dim, T* __restrict__ out,
                          float* __restrict__ lse) {
  const int64_t row = blockIdx.x;
  __shared__ float weight[kMaxSplits];
  __shared__ float total_lse;
  if (threadIdx.x == 0) {
    float m = -INFINITY;
    bool nan = false;
    for (int k = 0; k < num_splits; ++k) {
      const float v = ws_lse[k * num_rows + row];
      nan |= isnan(v);
      m = fmaxf(m, v);
    }
    float sum = 0.f;
    for (int k = 0; k < num_splits; ++k) {
      const float v = ws_lse[k * num_rows + row];
      weight[k] = (m == -INFINITY || nan) ? 0.f : __expf(v - m);
      sum += weight[k];
    }
    for (int k = 0; k < num_splits; ++k) weight[k] = sum > 0.f ? weight[k] / sum : 0.f;
    total_lse = nan ? NAN : (sum > 0.f ? m + __logf(sum) : -INFINITY);
    if (nan) weight[0] = NAN;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float acc = 0.f;
    for (int k = 0; k < num_splits; ++k) {
      const float w = weight[k];
      if (w != 0.f) acc += w * ws_out[(k * num_rows + row) * dim + d];  // skips unwritten garbage
    }
    out[row * dim + d] = from_float<T>(acc);
  }
  if (threadIdx.x == 0) lse[row] = total_lse;
}

}  // namespace jaxpaged
