// The portable paged-attention path (portable/kernel.cuh): the KV split count, the kernel, the
// merge of splits. Every instance is in this one unit: they are small, and a ROCm build compiles
// exactly this file.
#include "common/combine_splits.h"
#include "common/gpu_launch.h"
#include "paged_attention/launch.h"
#include "paged_attention/portable/kernel.cuh"

namespace jaxpaged {

namespace {

template <typename T, int D, bool FP8>
ffi::Error launch_dim(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws, gpuStream_t stream) {
  const int gh = portable_heads_per_block(p.num_q_heads / p.num_kv_heads);
  const int64_t blocks = p.num_tokens * (p.num_q_heads / gh);
  if (blocks > 0x7FFFFFFF) {
    return ffi::Error::InvalidArgument("jaxpaged: paged_attention needs more thread blocks than a grid holds (2^31 - 1)");
  }
  auto kernel = paged_portable_kernel<T, D, FP8>;
  const int splits = choose_kv_splits(blocks, w.split_cap, p.max_pages * p.page_size, 256,
                                      resident_blocks(kernel, kPortableThreads, 0));
  float* ws_out = w.split_out(ws);
  float* ws_lse = w.split_lse(ws, splits);
  kernel<<<dim3(unsigned(blocks), 1, unsigned(splits)), kPortableThreads, 0, stream>>>(
      p, page_shift_of(p.page_size), gh, ws_out, ws_lse);
  JP_RETURN_IF_ERROR(last_launch_error("paged_portable_kernel"));
  if (splits == 1) return ffi::Error::Success();
  return launch_combine_splits<T>(ws_out, ws_lse, splits, p.num_tokens * p.num_q_heads, D,
                                  static_cast<T*>(p.out), p.lse, stream);
}

}  // namespace

template <typename T, bool FP8>
ffi::Error launch_paged_portable(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws,
                                 gpuStream_t stream) {
  return with_paged_head_dim(p.head_dim, [&](auto d) { return launch_dim<T, decltype(d)::value, FP8>(p, w, ws, stream); });
}

template ffi::Error launch_paged_portable<gpu_half, false>(const PagedAttentionParams&, const PagedWorkspace&, float*,
                                                           gpuStream_t);
template ffi::Error launch_paged_portable<gpu_half, true>(const PagedAttentionParams&, const PagedWorkspace&, float*,
                                                          gpuStream_t);
template ffi::Error launch_paged_portable<gpu_bf16, false>(const PagedAttentionParams&, const PagedWorkspace&, float*,
                                                           gpuStream_t);
template ffi::Error launch_paged_portable<gpu_bf16, true>(const PagedAttentionParams&, const PagedWorkspace&, float*,
                                                          gpuStream_t);

}  // namespace jaxpaged
