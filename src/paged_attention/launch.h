// The paged-attention launchers the GPU handler picks from. Each is defined in its own
// translation unit (sm80/tiles.cu.in, one per instance; schedule.cu), so the kernels build in
// parallel and a new variant is a new instance, not an edit of the handler.
#pragma once

#include <type_traits>
#include <utility>

#include "common/ffi_helpers.h"
#include "common/gpu_launch.h"
#include "gpu_vendor.h"
#include "paged_attention/params.h"
#include "paged_attention/workspace.h"

namespace jaxpaged {

// Whether the fp8 register path's tiles of at most 8 rows run transposed (tile_kernel.cuh,
// attend_tile's TR; pure decode with GQA <= 8 then runs the DTR instance): unless the environment
// sets JAXPAGED_PAGED_TRANSPOSED=0 (read once; an A/B switch).
inline bool paged_transposed_tiles() {
  static const bool on = env_not_zero("JAXPAGED_PAGED_TRANSPOSED");
  return on;
}

// f(std::integral_constant<int, D>{}) for the call's head dim D, one of the kernels' 64, 128, 256
// (the head-dim switch of the tile path and the portable one).
template <typename F>
ffi::Error with_paged_head_dim(int64_t head_dim, F&& f) {
  switch (head_dim) {
    case 64: return std::forward<F>(f)(std::integral_constant<int, 64>{});
    case 128: return std::forward<F>(f)(std::integral_constant<int, 128>{});
    case 256: return std::forward<F>(f)(std::integral_constant<int, 256>{});
    default:
      return ffi::Error::InvalidArgument("jaxpaged: GPU paged_attention supports head dims 64, 128, 256");
  }
}

// Lists the tiles of calls with p's shapes, kv_lens and cu_q_lens on the device into `work`
// (the header, then work_cap entries): tile_schedule.cuh, schedule.cu (CUDA builds).
ffi::Error launch_paged_schedule(const PagedAttentionParams& p, int32_t* work, int64_t work_cap, gpuStream_t stream);

// The tile kernel for head dim D (LARGE: with the 64-row prefill tiles; FP8: over fp8 caches;
// DTR: the decode-transposed instance, pure decode with GQA <= 8 over fp8 caches only), then the
// merge of KV splits; runs the schedule first unless `plan` holds the call's tile list (or the call
// is pure decode, which needs none: in one wave, or up to 128 sequences with 16-bit caches and 256
// with fp8, whose blocks then order themselves). sm80/launch_tiles.cuh.
template <typename T, int D, bool LARGE, bool FP8, bool DTR = false>
ffi::Error launch_paged_tiles(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws,
                              const int32_t* plan, gpuStream_t stream);

// The portable path (portable/kernel.cuh: CUDA cores, no inline assembly; what a ROCm build
// runs, and the NVIDIA build with JAXPAGED_PORTABLE_KERNELS=1), then the merge of KV splits.
// portable/launch.cu.
template <typename T, bool FP8>
ffi::Error launch_paged_portable(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws,
                                 gpuStream_t stream);

// What the GPU handler does once the call is decoded: check the workspace (ws_floats words at ws),
// pick the instance for q's dtype, the cache's (fp8_cache: float8, p.kv_e5m2 says which) and the
// head dim, launch. plan: the call's tile list from the plan op (paged_plan_for), or null.
// handler_gpu.cu; also the entry point of tools/sanitize_driver.cu, which runs the kernels
// without JAX.
ffi::Error run_paged_attention_gpu(const PagedAttentionParams& p, ffi::DataType dtype, bool fp8_cache,
                                   float* ws, int64_t ws_floats, gpuStream_t stream, const int32_t* plan = nullptr);
// The plan op (jaxpaged.paged_attention_plan): the tile list of calls with these kv_lens and
// cu_q_lens (device memory; cu_q_lens unread when decode_only), num_tokens query rows, `group`
// query heads per KV head and `capacity` = max_pages x page_size, into `plan`
// (paged_plan_ints words). Zeros where no kernel reads a list (the portable kernels'). handler_gpu.cu.
ffi::Error run_paged_plan_gpu(const int32_t* kv_lens, const int32_t* cu_q_lens, int64_t num_seqs, int64_t num_tokens,
                              int64_t group, int64_t capacity, bool decode_only, int32_t* plan, gpuStream_t stream);

}  // namespace jaxpaged
