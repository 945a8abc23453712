// The one translation unit of the paged-attention tile schedule (tile_schedule.cuh).
#include "common/gpu_launch.h"
#include "paged_attention/launch.h"
#include "paged_attention/tile_schedule.cuh"

namespace jaxpaged {

template <typename T>
ffi::Error launch_paged_schedule(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws,
                                 int splits, gpuStream_t stream) {
  int32_t* work = reinterpret_cast<int32_t*>(ws);
  float* ws_lse = w.split_lse(ws, splits);
  // Block 0 writes the list; the others clear padding rows. Pure decode has none.
  const int64_t grid = 1 + (p.decode_only ? 0 : (p.num_tokens + kPaddingRowsPerBlock - 1) / kPaddingRowsPerBlock);
  paged_tile_schedule_kernel<T><<<unsigned(grid), kScheduleThreads, 0, stream>>>(p, work, w.list_capacity,
                                                                                 splits, ws_lse);
  return last_launch_error("paged_tile_schedule_kernel");
}

template ffi::Error launch_paged_schedule<gpu_half>(const PagedAttentionParams&, const PagedWorkspace&, float*,
                                                    int, gpuStream_t);
template ffi::Error launch_paged_schedule<gpu_bf16>(const PagedAttentionParams&, const PagedWorkspace&, float*,
                                                    int, gpuStream_t);

}  // namespace jaxpaged
