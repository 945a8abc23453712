// GPU handler for paged attention: decodes the call, checks its workspace against the layout
// (workspace.h), picks the kernel instance (dtype, head dim, with or without the large-tile path)
// and dispatches to its launcher (launch.h). No kernel is compiled here.
#include "common/gpu_launch.h"
#include "paged_attention/ffi_binding.h"
#include "paged_attention/launch.h"
#include "paged_attention/workspace.h"

namespace jaxpaged {

namespace {

#if !defined(JAXPAGED_VENDOR_HIP)  // the tile kernel (mma.sync, cp.async) is CUDA-only
// The instance without the large-tile path serves pure decode with a GQA group of at most 16.
template <typename T, int D, bool FP8>
ffi::Error launch_for_dim(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws, gpuStream_t s) {
  const bool large = !p.decode_only || is_large_tile(p.num_q_heads / p.num_kv_heads);
  return large ? launch_paged_tiles<T, D, true, FP8>(p, w, ws, s) : launch_paged_tiles<T, D, false, FP8>(p, w, ws, s);
}

template <typename T, bool FP8>
ffi::Error launch_for_cache(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws, gpuStream_t s) {
  return with_paged_head_dim(p.head_dim, [&](auto d) { return launch_for_dim<T, decltype(d)::value, FP8>(p, w, ws, s); });
}
#endif

ffi::Error paged_attention_gpu_impl(ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                                    ffi::Buffer<ffi::S32> kv_lens, ffi::Buffer<ffi::S32> block_tables,
                                    ffi::Buffer<ffi::S32> cu_q_lens, ffi::Buffer<ffi::S32> options,
                                    float scale, float soft_cap,
                                    int32_t sliding_window, float k_scale, float v_scale,
                                    int32_t kv_layout, int32_t decode_only,
                                    ffi::Result<ffi::AnyBuffer> out,
                                    ffi::Result<ffi::Buffer<ffi::F32>> lse,
                                    ffi::Result<ffi::Buffer<ffi::F32>> workspace, gpuStream_t stream) {
  PagedAttentionParams p;
  JP_RETURN_IF_ERROR(decode_paged_attention(q, k, v, kv_lens, block_tables, cu_q_lens, options, scale,
                                            soft_cap, sliding_window, k_scale, v_scale, kv_layout,
                                            decode_only, out,
                                            lse, &p));
  return run_paged_attention_gpu(p, q.element_type(), k.element_type() != q.element_type(),
                                 workspace->typed_data(), int64_t(workspace->element_count()), stream);
}

}  // namespace

ffi::Error run_paged_attention_gpu(const PagedAttentionParams& p, ffi::DataType dtype, bool fp8_cache, float* ws,
                                   int64_t ws_floats, gpuStream_t stream) {
  if (p.num_tokens == 0) return ffi::Error::Success();
  const PagedWorkspace w = PagedWorkspace::of(p);
  if (ws_floats < w.floats) {
    return ffi::Error::InvalidArgument("jaxpaged: paged_attention workspace smaller than its layout needs");
  }
  return with_gpu_dtype(dtype, "paged_attention", [&](auto t) -> ffi::Error {
    using T = decltype(t);
    if (use_portable_kernels()) {
      return fp8_cache ? launch_paged_portable<T, true>(p, w, ws, stream)
                       : launch_paged_portable<T, false>(p, w, ws, stream);
    }
#if defined(JAXPAGED_VENDOR_HIP)
    return ffi::Error::Internal("jaxpaged: unreachable (a ROCm build runs the portable kernels)");
#else
    return fp8_cache ? launch_for_cache<T, true>(p, w, ws, stream) : launch_for_cache<T, false>(p, w, ws, stream);
#endif
  });
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_paged_attention_gpu, paged_attention_gpu_impl,
                              paged_attention_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // workspace (workspace.h)
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
