// GPU handler for sparse (top-k) MLA decode: decodes the call and runs the MLA kernels over each
// query row's index list (mla_decode/handler_gpu.cu: run_mla_sparse_gpu).
#include "common/gpu_launch.h"
#include "mla_decode/launch.h"
#include "mla_sparse/ffi_binding.h"

namespace jaxpaged {
namespace {

ffi::Error mla_sparse_gpu_impl(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv, ffi::AnyBuffer kpe,
                               ffi::Buffer<ffi::S32> indices, ffi::Buffer<ffi::S32> topk_lens,
                               ffi::Buffer<ffi::S32> options, ffi::Buffer<ffi::S32> plan, float scale,
                               float kv_scale, int32_t ds_read, int32_t fp8_math, int32_t plan_rows,
                               int32_t plan_capacity, ffi::Result<ffi::AnyBuffer> out,
                               ffi::Result<ffi::Buffer<ffi::F32>> lse, ffi::Result<ffi::Buffer<ffi::F32>> workspace,
                               gpuStream_t stream) {
  MlaSparseParams p{};
  JP_RETURN_IF_ERROR(decode_mla_sparse(q_nope, q_pe, ckv, kpe, indices, topk_lens, options, scale, kv_scale, ds_read,
                                       fp8_math, out, lse, &p));
  return run_mla_sparse_gpu(p.mla, p.indices, p.topk_lens, p.topk, q_nope.element_type(), workspace->typed_data(),
                            int64_t(workspace->element_count()), stream,
                            mla_sparse_plan_for(p, plan, plan_rows, plan_capacity));
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_mla_decode_sparse_gpu, mla_sparse_gpu_impl,
                              mla_sparse_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // workspace (mla_decode/workspace.h)
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
