// The one translation unit of the paged-attention tile schedule (tile_schedule.cuh): for one call
// (into its workspace) and for the plan op (jaxpaged.paged_attention_plan).
#include "common/gpu_launch.h"
#include "paged_attention/launch.h"
#include "paged_attention/tile_schedule.cuh"

namespace jaxpaged {

ffi::Error launch_paged_schedule(const PagedAttentionParams& p, int32_t* work, int64_t work_cap, gpuStream_t stream) {
  if (work_cap >= kLargeTileFlag) {
    return ffi::Error::InvalidArgument("jaxpaged: paged_attention has more tiles than a tile word holds");
  }
  paged_tile_schedule_kernel<<<1, kScheduleThreads, 0, stream>>>(p, work, work_cap);
  return last_launch_error("paged_tile_schedule_kernel");
}

}  // namespace jaxpaged
