// GPU handler for MLA decode: decodes the call, picks the block shape and KV split count,
// launches, merges splits.
#include "common/combine_splits.cuh"
#include "common/gpu_launch.h"
#include "mla_decode/decode_kernel.cuh"
#include "mla_decode/ffi_binding.h"

namespace jaxpaged {
namespace {

template <typename T, int MT>
ffi::Error launch(const MlaDecodeParams& p, float* ws, int64_t ws_floats, gpuStream_t stream) {
  using L = MlaLayout<MT>;
  const int64_t rows = p.batch * p.s_q * p.num_heads;
  const int64_t row_blocks = (p.s_q * p.num_heads + L::kRows - 1) / L::kRows;
  const int64_t per_split = rows * (kMlaLatentDim + 1);
  const int cap = ws_floats >= per_split ? int(ws_floats / per_split) : 1;
  auto kernel = mla_decode_kernel<T, MT>;
  // Above 48 KiB, dynamic shared memory must be opted into (per device, so on every launch).
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::kSmemBytes)) !=
      gpuSuccess) {
    return last_launch_error("mla_decode_kernel (shared memory size)");
  }
  const int splits = choose_kv_splits(p.batch * row_blocks, cap < kMaxSplits ? cap : kMaxSplits,
                                      p.max_pages * p.page_size, 256,
                                      resident_blocks(kernel, kMlaThreads, L::kSmemBytes));
  float* ws_out = ws;
  float* ws_lse = ws + int64_t(splits) * rows * kMlaLatentDim;
  dim3 grid(unsigned(p.batch), unsigned(row_blocks), unsigned(splits));
  kernel<<<grid, kMlaThreads, L::kSmemBytes, stream>>>(p, page_shift_of(p.page_size), ws_out, ws_lse);
  JP_RETURN_IF_ERROR(last_launch_error("mla_decode_kernel"));
  if (splits > 1) {
    combine_splits_kernel<T><<<unsigned(rows), kCombineThreads, 0, stream>>>(
        ws_out, ws_lse, splits, rows, kMlaLatentDim, static_cast<T*>(p.out), p.lse);
    JP_RETURN_IF_ERROR(last_launch_error("combine_splits_kernel"));
  }
  return ffi::Error::Success();
}

template <typename T>
ffi::Error dispatch_rows(const MlaDecodeParams& p, float* ws, int64_t n, gpuStream_t s) {
  return mla_row_tiles(p.s_q * p.num_heads) == 4 ? launch<T, 4>(p, ws, n, s) : launch<T, 1>(p, ws, n, s);
}

ffi::Error mla_decode_gpu_impl(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv,
                               ffi::AnyBuffer kpe, ffi::Buffer<ffi::S32> kv_lens,
                               ffi::Buffer<ffi::S32> block_tables, float scale, int32_t causal,
                               ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::Buffer<ffi::F32>> lse,
                               ffi::Result<ffi::Buffer<ffi::F32>> workspace, gpuStream_t stream) {
  MlaDecodeParams p;
  JP_RETURN_IF_ERROR(decode_mla_decode(q_nope, q_pe, ckv, kpe, kv_lens, block_tables, scale, causal,
                                       out, lse, &p));
  if (p.batch * p.s_q * p.num_heads == 0) return ffi::Error::Success();
  float* ws = workspace->typed_data();
  const int64_t ws_floats = int64_t(workspace->element_count());
  switch (q_nope.element_type()) {
    case ffi::DataType::F16: return dispatch_rows<gpu_half>(p, ws, ws_floats, stream);
    case ffi::DataType::BF16: return dispatch_rows<gpu_bf16>(p, ws, ws_floats, stream);
    default:
      return ffi::Error::InvalidArgument("jaxpaged: GPU mla_decode supports float16 and bfloat16");
  }
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_mla_decode_gpu, mla_decode_gpu_impl,
                              mla_decode_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // split-KV workspace
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
