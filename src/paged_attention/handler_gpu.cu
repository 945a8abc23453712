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
// The instance without the large-tile path serves pure decode with a GQA group of at most 16; over
// fp8 caches with a group of at most 8, the decode-transposed one (DTR: every tile transposed, more
// blocks an SM) unless JAXPAGED_PAGED_TRANSPOSED=0.
template <typename T, int D, bool FP8>
ffi::Error launch_for_dim(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws, const int32_t* plan,
                          gpuStream_t s) {
  if constexpr (FP8) {
    if (p.decode_only && p.num_q_heads / p.num_kv_heads <= 8 && paged_transposed_tiles()) {
      return launch_paged_tiles<T, D, false, true, true>(p, w, ws, plan, s);
    }
  }
  const bool large = !p.decode_only || is_large_tile(p.num_q_heads / p.num_kv_heads);
  return large ? launch_paged_tiles<T, D, true, FP8>(p, w, ws, plan, s)
               : launch_paged_tiles<T, D, false, FP8>(p, w, ws, plan, s);
}

template <typename T, bool FP8>
ffi::Error launch_for_cache(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws, const int32_t* plan,
                            gpuStream_t s) {
  return with_paged_head_dim(p.head_dim,
                             [&](auto d) { return launch_for_dim<T, decltype(d)::value, FP8>(p, w, ws, plan, s); });
}
#endif

ffi::Error paged_attention_gpu_impl(ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                                    ffi::Buffer<ffi::S32> kv_lens, ffi::Buffer<ffi::S32> block_tables,
                                    ffi::Buffer<ffi::S32> cu_q_lens, ffi::Buffer<ffi::S32> options,
                                    ffi::Buffer<ffi::S32> plan, float scale, float soft_cap,
                                    int32_t sliding_window, float k_scale, float v_scale,
                                    int32_t kv_layout, int32_t decode_only, int32_t plan_tokens,
                                    int32_t plan_group, int32_t plan_capacity,
                                    ffi::Result<ffi::AnyBuffer> out,
                                    ffi::Result<ffi::Buffer<ffi::F32>> lse,
                                    ffi::Result<ffi::Buffer<ffi::F32>> workspace, gpuStream_t stream) {
  PagedAttentionParams p;
  JP_RETURN_IF_ERROR(decode_paged_attention(q, k, v, kv_lens, block_tables, cu_q_lens, options, scale,
                                            soft_cap, sliding_window, k_scale, v_scale, kv_layout,
                                            decode_only, out,
                                            lse, &p));
  return run_paged_attention_gpu(p, q.element_type(), k.element_type() != q.element_type(),
                                 workspace->typed_data(), int64_t(workspace->element_count()), stream,
                                 paged_plan_for(p, plan, plan_tokens, plan_group, plan_capacity));
}

ffi::Error paged_attention_plan_gpu_impl(ffi::Buffer<ffi::S32> kv_lens, ffi::Buffer<ffi::S32> cu_q_lens,
                                         int32_t num_tokens, int32_t group, int32_t capacity, int32_t decode_only,
                                         ffi::Result<ffi::Buffer<ffi::S32>> plan,
                                         ffi::Result<ffi::Buffer<ffi::F32>> /*workspace: none*/, gpuStream_t stream) {
  const int64_t num_seqs = int64_t(kv_lens.element_count());
  JP_RETURN_IF_ERROR(check_dim(int64_t(cu_q_lens.element_count()), decode_only ? 0 : num_seqs + 1, "cu_q_lens length"));
  JP_RETURN_IF_ERROR(check_dim(int64_t(plan->element_count()), paged_plan_ints(num_tokens, group, num_seqs), "plan size"));
  return run_paged_plan_gpu(kv_lens.typed_data(), cu_q_lens.typed_data(), num_seqs, num_tokens, group, capacity,
                            decode_only != 0, plan->typed_data(), stream);
}

}  // namespace

ffi::Error run_paged_attention_gpu(const PagedAttentionParams& p, ffi::DataType dtype, bool fp8_cache, float* ws,
                                   int64_t ws_floats, gpuStream_t stream, const int32_t* plan) {
  if (p.num_tokens == 0) return ffi::Error::Success();
  const PagedWorkspace w = PagedWorkspace::of(p);
  if (ws_floats < w.floats) {
    return ffi::Error::InvalidArgument("jaxpaged: paged_attention workspace smaller than its layout needs");
  }
  return with_gpu_dtype(dtype, "paged_attention", [&](auto t) -> ffi::Error {
    using T = decltype(t);
    if (use_portable_kernels()) {  // (it visits rows directly: no tile list, no plan)
      return fp8_cache ? launch_paged_portable<T, true>(p, w, ws, stream)
                       : launch_paged_portable<T, false>(p, w, ws, stream);
    }
#if defined(JAXPAGED_VENDOR_HIP)
    return ffi::Error::Internal("jaxpaged: unreachable (a ROCm build runs the portable kernels)");
#else
    return fp8_cache ? launch_for_cache<T, true>(p, w, ws, plan, stream)
                     : launch_for_cache<T, false>(p, w, ws, plan, stream);
#endif
  });
}

ffi::Error run_paged_plan_gpu(const int32_t* kv_lens, const int32_t* cu_q_lens, int64_t num_seqs, int64_t num_tokens,
                              int64_t group, int64_t capacity, bool decode_only, int32_t* plan, gpuStream_t stream) {
  if (num_seqs < 0 || num_tokens < 0 || group < 1 || capacity < 0 || (decode_only && num_tokens != num_seqs)) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: paged_attention_plan needs num_tokens, num_seqs, capacity >= 0 and group >= 1 "
        "(and num_tokens == num_seqs for pure decode)");
  }
  const int64_t cap = paged_list_capacity(num_tokens, group, num_seqs);
#if !defined(JAXPAGED_VENDOR_HIP)
  if (!use_portable_kernels()) {
    PagedAttentionParams p{};  // (the shapes and arrays the schedule reads)
    p.kv_lens = kv_lens;
    p.cu_q_lens = cu_q_lens;
    p.num_seqs = num_seqs;
    p.num_tokens = num_tokens;
    p.num_q_heads = group;
    p.num_kv_heads = 1;
    p.max_pages = capacity;
    p.page_size = 1;
    p.decode_only = decode_only;
    return launch_paged_schedule(p, plan, cap, stream);
  }
#else
  (void)kv_lens, (void)cu_q_lens, (void)capacity, (void)decode_only;
#endif
  // The portable kernels (all a ROCm build has) read no tile list: zeros, as the CPU's.
  const gpu::Error err = gpu::memset_async(plan, 0, size_t(2 * (cap + 1)) * sizeof(int32_t), stream);
  if (err == gpu::kSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxpaged: clearing paged_attention_plan's output failed: ") +
                              gpu::error_string(err));
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_paged_attention_gpu, paged_attention_gpu_impl,
                              paged_attention_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // workspace (workspace.h)
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_paged_attention_plan_gpu, paged_attention_plan_gpu_impl,
                              paged_attention_plan_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // workspace: none (one word)
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
