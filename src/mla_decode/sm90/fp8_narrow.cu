// The narrow fp8 MLA kernel's launcher (sm90/fp8_narrow.cuh; built for sm_90a only).
#include "common/gpu_launch.h"
#include "mla_decode/launch.h"
#include "mla_decode/sm90/fp8_narrow.cuh"
#include "mla_decode/sm90/tma_maps.h"

namespace jaxpaged {

ffi::Error launch_mla_fp8_narrow(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, float* ws_out,
                                 float* ws_lse, const MlaNarrowMap& map, gpuStream_t stream) {
  auto kernel = p.kv_e5m2 ? mla_fp8_narrow_kernel<gpu_bf16, true> : mla_fp8_narrow_kernel<gpu_bf16, false>;
  JP_RETURN_IF_ERROR(allow_smem(kernel, MlaNarrowSmem::kAllocBytes, "mla_fp8_narrow_kernel (shared memory size)"));
  return launch_chained(p.dependent_attention, "mla_fp8_narrow_kernel", kernel, dim3(unsigned(parts)),
                        dim3(kNarrowThreads), MlaNarrowSmem::kAllocBytes, stream, p, page_shift_of(p.page_size), sched,
                        ws_out, ws_lse, map.cache);
}

}  // namespace jaxpaged
