// CPU handler for MLA decode: exact semantics in plain C++ with float32 accumulation.
// Each cached token is converted to float once per batch row and shared by all query heads.
#include <algorithm>
#include <vector>

#include "common/host_softmax.h"
#include "common/masking.h"
#include "mla_decode/ffi_binding.h"
#include "mla_decode/host_tokens.h"

namespace jaxpaged {
namespace {

void mla_decode_cpu(const MlaDecodeParams& p, Dtype dt, const MlaCacheFormat& format) {
  constexpr int64_t DL = kMlaLatentDim, DR = kMlaRopeDim;
  const int64_t capacity = p.max_pages * p.page_size;
  const float scale = mla_scale(p);  // host memory here, traced or not
  HostSoftmax softmax(DL);
  std::vector<float> latent, rope;

  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t kv_len = clamp_kv_len(p.kv_lens[b], capacity);
    // Causal rows see fewer keys; gather (and check) the longest row's range once.
    bool bad_page = false;
    latent.resize(kv_len * DL);
    rope.resize(kv_len * DR);
    for (int64_t j = 0; j < kv_len && !bad_page; ++j) {
      const int64_t page = p.block_tables[b * p.max_pages + j / p.page_size];
      if (page < 0 || page >= p.num_pages) { bad_page = true; break; }
      load_token(p, format, page, j % p.page_size, &latent[j * DL], &rope[j * DR]);
    }
    for (int64_t i = 0; i < p.s_q; ++i) {
      // Non-causal rows see the whole cache; causal query i sees keys j <= kv_len - s_q + i.
      const KeyRange r = p.causal ? visible_keys(kv_len, p.s_q, i, 0) : KeyRange{0, kv_len};
      const int64_t n = r.empty() ? 0 : r.end;
      mla_attend_heads(p, dt, b * p.s_q + i, n, bad_page, latent.data(), rope.data(), scale, softmax);
    }
  }
}

ffi::Error mla_decode_cpu_impl(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv,
                               ffi::AnyBuffer kpe, ffi::Buffer<ffi::S32> kv_lens,
                               ffi::Buffer<ffi::S32> block_tables, ffi::Buffer<ffi::S32> options,
                               ffi::Buffer<ffi::S32> /*plan: the CPU needs no schedule*/, float scale,
                               float kv_scale, int32_t ds_read, int32_t fp8_math, int32_t causal, int32_t /*plan_rows*/, int32_t /*plan_capacity*/,
                               ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::Buffer<ffi::F32>> lse) {
  MlaDecodeParams p;
  JP_RETURN_IF_ERROR(decode_mla_decode(q_nope, q_pe, ckv, kpe, kv_lens, block_tables, options, scale, kv_scale, ds_read, fp8_math,
                                       causal, out, lse, &p));
  // (fp8_math is a permission: the CPU kernel computes exactly either way)
  Dtype dt;
  MlaCacheFormat format;
  if (!to_dtype(q_nope.element_type(), &dt) ||
      !mla_cache_format(p, ckv.element_type(), kpe.element_type(), &format)) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: mla_decode supports float32, float16, bfloat16 (caches also fp8 or 656-byte rows)");
  }
  mla_decode_cpu(p, dt, format);
  return ffi::Error::Success();
}

// The plan op on the CPU: zeros (the CPU handler computes without a schedule).
ffi::Error mla_decode_plan_cpu_impl(ffi::Buffer<ffi::S32> kv_lens, int32_t /*rows*/, int32_t /*capacity*/,
                                    ffi::Result<ffi::Buffer<ffi::S32>> plan) {
  JP_RETURN_IF_ERROR(check_dim(int64_t(plan->element_count()), mla_plan_ints(int64_t(kv_lens.element_count())),
                               "plan size"));
  std::fill(plan->typed_data(), plan->typed_data() + plan->element_count(), 0);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_mla_decode_cpu, mla_decode_cpu_impl, mla_decode_binding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_mla_decode_plan_cpu, mla_decode_plan_cpu_impl, mla_decode_plan_binding());

}  // namespace jaxpaged
