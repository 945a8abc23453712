// The launcher of one Hopper MLA kernel instance (included by one generated translation unit per
// instance, sm90/wgmma.cu.in; built only for sm_90a).
#pragma once

#include "common/gpu_launch.h"
#include "mla_decode/launch.h"
#include "mla_decode/sm90/kernel.cuh"

namespace jaxpaged {

template <typename T, bool kTma, bool kSparse, int kFmt>
ffi::Error launch_mla_wgmma(const MlaDecodeParams& p, int row_blocks, int parts, const MlaSchedule& sched,
                            float* ws_out, float* ws_lse, const MlaTmaMaps& maps, gpuStream_t stream) {
  auto kernel = mla_wgmma_kernel<T, kTma, kSparse, kFmt>;
  JP_RETURN_IF_ERROR(allow_smem(kernel, MlaWgSmem::kAllocBytes, "mla_wgmma_kernel (shared memory size)"));
  // (a dependent launch of the schedule kernel ahead of it, if this call made one: kernel.cuh)
  return launch_chained(p.dependent_attention, "mla_wgmma_kernel", kernel, dim3(unsigned(parts * row_blocks)),
                        dim3(kMlaWgThreads), MlaWgSmem::kAllocBytes, stream, p, page_shift_of(p.page_size), row_blocks,
                        sched, ws_out, ws_lse, maps);
}

}  // namespace jaxpaged
