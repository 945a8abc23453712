// GPU handler for sparse (top-k) MLA decode: decodes the call and runs the portable MLA kernel over
// each query row's index list (mla_decode/portable/), for every cache format.
#include "common/gpu_launch.h"
#include "mla_decode/launch.h"
#include "mla_sparse/ffi_binding.h"

namespace jaxpaged {
namespace {

ffi::Error mla_sparse_gpu_impl(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv, ffi::AnyBuffer kpe,
                               ffi::Buffer<ffi::S32> indices, ffi::Buffer<ffi::S32> topk_lens,
                               ffi::Buffer<ffi::S32> options, float scale, float kv_scale,
                               ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::Buffer<ffi::F32>> lse,
                               ffi::Result<ffi::Buffer<ffi::F32>> /*workspace: none used*/, gpuStream_t stream) {
  MlaSparseParams p{};
  JP_RETURN_IF_ERROR(decode_mla_sparse(q_nope, q_pe, ckv, kpe, indices, topk_lens, options, scale, kv_scale, out,
                                       lse, &p));
  if (p.mla.batch * p.mla.s_q * p.mla.num_heads == 0) return ffi::Error::Success();
  return with_gpu_dtype(q_nope.element_type(), "mla_decode_sparse", [&](auto t) -> ffi::Error {
    using T = decltype(t);
    return launch_mla_sparse_portable<T>(p.mla, p.indices, p.topk_lens, p.topk, stream);
  });
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_mla_decode_sparse_gpu, mla_sparse_gpu_impl,
                              mla_sparse_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // workspace (one word: none is used)
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
