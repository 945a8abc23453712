// The portable MLA-decode path (portable/kernel.cuh): the KV split count, the kernel, the merge of
// splits (its workspace is the sm_80 path's layout: KV splits' partial results); and sparse MLA
// decode, whose one GPU kernel this is so far. Quantized caches (fp8, 656-byte rows) take it on
// every GPU for now.
#include "common/combine_splits.h"
#include "common/gpu_launch.h"
#include "mla_decode/launch.h"
#include "mla_decode/portable/kernel.cuh"

namespace jaxpaged {

// The kernel instance for p's cache format.
template <typename T, bool SPARSE>
auto mla_portable_instance(const MlaDecodeParams& p) {
  return p.ds_rows ? mla_portable_kernel<T, SPARSE, kMlaDsRows>
                   : (p.fp8 ? mla_portable_kernel<T, SPARSE, kMlaFp8> : mla_portable_kernel<T, SPARSE, kMlaSame>);
}

template <typename T>
ffi::Error launch_mla_portable(const MlaDecodeParams& p, const MlaWorkspace& w, float* ws, gpuStream_t stream) {
  if (w.hopper) return ffi::Error::Internal("jaxpaged: the portable MLA path needs the split workspace layout");
  const int64_t rows = p.batch * p.s_q * p.num_heads;
  const int64_t blocks = p.batch * p.s_q * ((p.num_heads + kMlaPortableHeads - 1) / kMlaPortableHeads);
  if (blocks > 0x7FFFFFFF) {
    return ffi::Error::InvalidArgument("jaxpaged: mla_decode needs more thread blocks than a grid holds (2^31 - 1)");
  }
  auto kernel = mla_portable_instance<T, false>(p);
  const int splits = choose_kv_splits(blocks, w.split_cap, p.max_pages * p.page_size, 256,
                                      resident_blocks(kernel, kMlaPortableThreads, 0));
  float* ws_out = ws;
  float* ws_lse = ws + int64_t(splits) * rows * kMlaLatentDim;
  kernel<<<dim3(unsigned(blocks), 1, unsigned(splits)), kMlaPortableThreads, 0, stream>>>(
      p, page_shift_of(p.page_size), MlaSparseLists{}, ws_out, ws_lse);
  JP_RETURN_IF_ERROR(last_launch_error("mla_portable_kernel"));
  if (splits == 1) return ffi::Error::Success();
  return launch_combine_splits<T>(ws_out, ws_lse, splits, rows, kMlaLatentDim, static_cast<T*>(p.out), p.lse,
                                  stream);
}

template <typename T>
ffi::Error launch_mla_sparse_portable(const MlaDecodeParams& p, const int32_t* indices, const int32_t* topk_lens,
                                      int64_t topk, gpuStream_t stream) {
  const int64_t blocks = p.batch * p.s_q * ((p.num_heads + kMlaPortableHeads - 1) / kMlaPortableHeads);
  if (blocks > 0x7FFFFFFF) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: mla_decode_sparse needs more thread blocks than a grid holds (2^31 - 1)");
  }
  // One split (the op has no workspace): a row's top-k list is short next to a dense context.
  mla_portable_instance<T, true>(p)<<<dim3(unsigned(blocks), 1, 1), kMlaPortableThreads, 0, stream>>>(
      p, 0, MlaSparseLists{indices, topk_lens, topk}, nullptr, nullptr);
  return last_launch_error("mla_portable_kernel (sparse)");
}

template ffi::Error launch_mla_sparse_portable<gpu_half>(const MlaDecodeParams&, const int32_t*, const int32_t*,
                                                         int64_t, gpuStream_t);
template ffi::Error launch_mla_sparse_portable<gpu_bf16>(const MlaDecodeParams&, const int32_t*, const int32_t*,
                                                         int64_t, gpuStream_t);
template ffi::Error launch_mla_portable<gpu_half>(const MlaDecodeParams&, const MlaWorkspace&, float*, gpuStream_t);
template ffi::Error launch_mla_portable<gpu_bf16>(const MlaDecodeParams&, const MlaWorkspace&, float*, gpuStream_t);

}  // namespace jaxpaged
