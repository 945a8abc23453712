// The wide MLA kernels' launchers, per-tensor fp8 rows and 656-byte rows (sm90/fp8_wide.cuh; built for
// sm_90a only).
#include "common/gpu_launch.h"
#include "mla_decode/launch.h"
#include "mla_decode/sm90/fp8_wide.cuh"
#include "mla_decode/sm90/tma_maps.h"

namespace jaxpaged {

ffi::Error launch_mla_fp8_wide(const MlaDecodeParams& p, int row_blocks, int parts, const MlaSchedule& sched,
                               float* ws_out, float* ws_lse, const MlaNarrowMap& map, gpuStream_t stream) {
  const bool f8 = p.fp8_math;  // (mla_decode(..., fp8_math=True): the kF8 mode, NOTES item 61)
  auto kernel = p.kv_e5m2 ? (f8 ? mla_fp8_wide_kernel<gpu_bf16, true, true> : mla_fp8_wide_kernel<gpu_bf16, true>)
                          : (f8 ? mla_fp8_wide_kernel<gpu_bf16, false, true> : mla_fp8_wide_kernel<gpu_bf16, false>);
  JP_RETURN_IF_ERROR(allow_smem(kernel, MlaWideSmem::kAllocBytes, "mla_fp8_wide_kernel (shared memory size)"));
  return launch_chained(p.dependent_attention, "mla_fp8_wide_kernel", kernel, dim3(unsigned(parts * row_blocks)),
                        dim3(kWideThreads), MlaWideSmem::kAllocBytes, stream, p, page_shift_of(p.page_size),
                        row_blocks, sched, ws_out, ws_lse, map.cache);
}

ffi::Error launch_mla_ds_wide(const MlaDecodeParams& p, int row_blocks, int parts, const MlaSchedule& sched,
                              float* ws_out, float* ws_lse, const MlaDsMaps& maps, gpuStream_t stream) {
  if (mla_ds_fp8_math_applies(p)) {  // (fp8_math=True: the kDF mode, whatever the reading)
    auto kernel = p.sparse ? mla_ds_wide_kernel<gpu_bf16, true, false, true> : mla_ds_wide_kernel<gpu_bf16, false, false, true>;
    constexpr size_t kBytes = MlaWideSmemT<true, true>::kAllocBytes;
    JP_RETURN_IF_ERROR(allow_smem(kernel, kBytes, "mla_ds_wide_kernel (fp8 math; shared memory size)"));
    return launch_chained(p.dependent_attention, "mla_ds_wide_kernel", kernel, dim3(unsigned(parts * row_blocks)),
                          dim3(kWideThreads), kBytes, stream, p, page_shift_of(p.page_size), row_blocks, sched, ws_out,
                          ws_lse, maps.latent, maps.tail);
  }
  const bool h = p.ds_f16;  // (ds_dequant="float16": f16 products, else the bf16 reading's bf16)
  auto kernel = p.sparse ? (h ? mla_ds_wide_kernel<gpu_bf16, true, true> : mla_ds_wide_kernel<gpu_bf16, true>)
                         : (h ? mla_ds_wide_kernel<gpu_bf16, false, true> : mla_ds_wide_kernel<gpu_bf16, false>);
  JP_RETURN_IF_ERROR(allow_smem(kernel, MlaWideSmemT<true>::kAllocBytes, "mla_ds_wide_kernel (shared memory size)"));
  return launch_chained(p.dependent_attention, "mla_ds_wide_kernel", kernel, dim3(unsigned(parts * row_blocks)),
                        dim3(kWideThreads), MlaWideSmemT<true>::kAllocBytes, stream, p, page_shift_of(p.page_size),
                        row_blocks, sched, ws_out, ws_lse, maps.latent, maps.tail);
}

}  // namespace jaxpaged
