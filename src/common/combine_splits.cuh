// Merges the partial results of KV splits (flash-decoding) into the final output and lse.
// Each split wrote, per output row, its normalised output (float) and its natural-log lse; the
// merge weights split k by exp(lse_k - max lse). An empty split has lse -inf and weight 0; a NaN
// lse (corrupt page id seen by that split) makes the whole row NaN.
#pragma once

#include "common/gpu_math.cuh"
#include "common/pdl.cuh"
#include "common/kv_splits.h"

namespace jaxpaged {

constexpr int kCombineThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    combine_splits_kernel(const float* __restrict__ ws_out, const float* __restrict__ ws_lse,
                          int num_splits, int64_t num_rows, int dim, T* __restrict__ out,
                          float* __restrict__ lse) {
  pdl_wait();  // (a dependent launch: the splits' results are the kernel ahead's)
  const int64_t row = blockIdx.x;
  __shared__ float weight[kMaxSplits];
  __shared__ float total_lse;
  if (threadIdx.x < 32) {  // one warp derives the weights, two splits per lane
    static_assert(kMaxSplits <= 64, "two splits per lane");
    const int lane = threadIdx.x;
    const float v0 = lane < num_splits ? ws_lse[lane * num_rows + row] : -INFINITY;
    const float v1 = lane + 32 < num_splits ? ws_lse[(lane + 32) * num_rows + row] : -INFINITY;
    int nan = isnan(v0) || isnan(v1);
    float m = fmaxf(v0, v1);  // fmaxf skips a NaN; the flag carries it
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      nan |= gpu::shfl_xor(nan, off);
      m = fmaxf(m, gpu::shfl_xor(m, off));
    }
    const bool none = m == -INFINITY || nan;
    const float w0 = none ? 0.f : __expf(v0 - m), w1 = none ? 0.f : __expf(v1 - m);
    float sum = w0 + w1;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += gpu::shfl_xor(sum, off);
    if (lane < num_splits) weight[lane] = sum > 0.f ? w0 / sum : 0.f;
    if (lane + 32 < num_splits) weight[lane + 32] = sum > 0.f ? w1 / sum : 0.f;
    if (lane == 0) {
      total_lse = nan ? NAN : (sum > 0.f ? m + __logf(sum) : -INFINITY);
      if (nan) weight[0] = NAN;
    }
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
