// CPU handler for sparse (top-k) MLA decode: each query row attends the cache tokens its indices
// name (float32 math; a duplicated index counts as often as it appears; an index outside the
// cache is no key; fp8_math is a permission: this kernel computes exactly either way). The GPU's:
// handler_gpu.cu.
#include <algorithm>
#include <vector>

#include "common/host_softmax.h"
#include "mla_decode/host_tokens.h"
#include "mla_sparse/ffi_binding.h"

namespace jaxpaged {
namespace {

void mla_sparse_cpu(const MlaSparseParams& sp, Dtype dt, const MlaCacheFormat& format) {
  constexpr int64_t DL = kMlaLatentDim, DR = kMlaRopeDim;
  const MlaDecodeParams& p = sp.mla;
  const int64_t tokens = p.num_pages * p.page_size;
  const float scale = mla_scale(p);
  HostSoftmax softmax(DL);
  std::vector<float> latent, rope;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t count = sp.topk_lens ? std::clamp<int64_t>(sp.topk_lens[b], 0, sp.topk) : sp.topk;
    for (int64_t i = 0; i < p.s_q; ++i) {
      const int32_t* idx = sp.indices + (b * p.s_q + i) * sp.topk;
      latent.clear();
      rope.clear();
      int64_t n = 0;
      for (int64_t t = 0; t < count; ++t) {
        const int64_t slot = idx[t];
        if (slot < 0 || slot >= tokens) continue;  // no key
        latent.resize((n + 1) * DL);
        rope.resize((n + 1) * DR);
        load_token(p, format, slot / p.page_size, slot % p.page_size, &latent[n * DL], &rope[n * DR]);
        ++n;
      }
      mla_attend_heads(p, dt, b * p.s_q + i, n, false, latent.data(), rope.data(), scale, softmax);
    }
  }
}

ffi::Error mla_sparse_cpu_impl(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv, ffi::AnyBuffer kpe,
                               ffi::Buffer<ffi::S32> indices, ffi::Buffer<ffi::S32> topk_lens,
                               ffi::Buffer<ffi::S32> options, ffi::Buffer<ffi::S32> /*plan: the CPU needs none*/,
                               float scale, float kv_scale, int32_t ds_read, int32_t fp8_math,
                               int32_t /*plan_rows*/, int32_t /*plan_capacity*/, ffi::Result<ffi::AnyBuffer> out,
                               ffi::Result<ffi::Buffer<ffi::F32>> lse) {
  MlaSparseParams p{};
  JP_RETURN_IF_ERROR(decode_mla_sparse(q_nope, q_pe, ckv, kpe, indices, topk_lens, options, scale, kv_scale, ds_read,
                                       fp8_math, out, lse, &p));
  Dtype dt;
  MlaCacheFormat format;
  if (!to_dtype(q_nope.element_type(), &dt) ||
      !mla_cache_format(p.mla, ckv.element_type(), kpe.element_type(), &format)) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: mla_decode_sparse supports float32, float16, bfloat16 (caches also fp8 or 656-byte rows)");
  }
  mla_sparse_cpu(p, dt, format);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_mla_decode_sparse_cpu, mla_sparse_cpu_impl, mla_sparse_binding());

}  // namespace jaxpaged
