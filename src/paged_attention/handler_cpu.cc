// CPU handler for paged attention: the exact semantics in plain C++, float32 accumulation.
// It makes the real FFI path testable without a GPU; speed is secondary (two-pass softmax,
// K/V rows converted to float once per (row, kv head) and reused by the whole query group).
#include <algorithm>
#include <vector>

#include "common/host_softmax.h"
#include "common/masking.h"
#include "paged_attention/ffi_binding.h"

namespace jaxpaged {
namespace {

// dt: q's and out's dtype; kv_dt: the caches' (q's, or fp8 scaled by k_scale / v_scale).
void paged_attention_cpu(const PagedAttentionParams& p, Dtype dt, Dtype kv_dt) {
  const int64_t H = p.num_q_heads, D = p.head_dim, G = p.num_q_heads / p.num_kv_heads;
  const int64_t capacity = p.max_pages * p.page_size;
  const PagedOptions opt = paged_options(p);  // host memory here, traced or not
  const float k_scale = is_fp8(kv_dt) ? opt.k_scale : 1.f, v_scale = is_fp8(kv_dt) ? opt.v_scale : 1.f;
  HostSoftmax softmax(D);
  std::vector<float> keys, vals;

  for (int64_t t = 0; t < p.num_tokens; ++t) {
    int64_t s = t, q_begin = t, q_len = 1;
    const bool has_seq = p.decode_only
                             ? true
                             : find_sequence(p.cu_q_lens, p.num_seqs, p.num_tokens, t, &s, &q_begin, &q_len);
    KeyRange r{0, 0};
    if (has_seq) {
      const int64_t kv_len = clamp_kv_len(p.kv_lens[s], capacity);
      r = visible_keys(kv_len, q_len, t - q_begin, opt.sliding_window);
    }
    const int64_t n = r.empty() ? 0 : r.end - r.begin;
    // A visible key on a page whose id is out of range poisons the row with NaN: the loud
    // signal for a corrupt block table, since a device op cannot raise.
    bool bad_page = false;
    std::vector<int64_t> key_offset(n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = r.begin + i;
      const int64_t page = p.block_tables[s * p.max_pages + j / p.page_size];
      if (page < 0 || page >= p.num_pages) { bad_page = true; break; }
      key_offset[i] = page * p.page_stride + (j % p.page_size) * p.slot_stride;
    }
    for (int64_t kvh = 0; kvh < p.num_kv_heads; ++kvh) {
      if (!bad_page && n > 0) {
        keys.resize(n * D);
        vals.resize(n * D);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t base = key_offset[i] + kvh * p.head_stride;
          for (int64_t d = 0; d < D; ++d) {
            keys[i * D + d] = load_float(p.k_cache, base + d, kv_dt) * k_scale;
            vals[i * D + d] = load_float(p.v_cache, base + d, kv_dt) * v_scale;
          }
        }
      }
      for (int64_t h = kvh * G; h < (kvh + 1) * G; ++h) {
        const int64_t row = t * H + h;
        if (bad_page || n == 0) {
          softmax.empty_row(bad_page, p.out, row, p.lse, dt);
          continue;
        }
        std::vector<float> qf(D);
        for (int64_t d = 0; d < D; ++d) qf[d] = load_float(p.q, row * D + d, dt);
        const auto score = [&](int64_t i) {
          float dot = 0.f;
          for (int64_t d = 0; d < D; ++d) dot += qf[d] * keys[i * D + d];
          return apply_soft_cap(dot * opt.scale, opt.soft_cap);
        };
        softmax.row(n, score, vals.data(), p.out, row, p.lse, dt);
      }
    }
  }
}

ffi::Error paged_attention_cpu_impl(ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                                    ffi::Buffer<ffi::S32> kv_lens, ffi::Buffer<ffi::S32> block_tables,
                                    ffi::Buffer<ffi::S32> cu_q_lens, ffi::Buffer<ffi::S32> options,
                                    ffi::Buffer<ffi::S32> /*plan: the CPU lists no tiles*/,
                                    float scale, float soft_cap,
                                    int32_t sliding_window, float k_scale, float v_scale,
                                    int32_t kv_layout, int32_t decode_only, int32_t /*plan_tokens*/,
                                    int32_t /*plan_group*/, int32_t /*plan_capacity*/,
                                    ffi::Result<ffi::AnyBuffer> out,
                                    ffi::Result<ffi::Buffer<ffi::F32>> lse) {
  PagedAttentionParams p;
  JP_RETURN_IF_ERROR(decode_paged_attention(q, k, v, kv_lens, block_tables, cu_q_lens, options, scale,
                                            soft_cap, sliding_window, k_scale, v_scale, kv_layout,
                                            decode_only, out,
                                            lse, &p));
  Dtype dt, kv_dt;
  if (!to_dtype(q.element_type(), &dt) || !to_cache_dtype(k.element_type(), &kv_dt)) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: paged_attention supports float32, float16, bfloat16 (caches also float8_e4m3fn, float8_e5m2)");
  }
  paged_attention_cpu(p, dt, kv_dt);
  return ffi::Error::Success();
}

// The plan op on the CPU: zeros (the CPU handler visits rows without a tile list).
ffi::Error paged_attention_plan_cpu_impl(ffi::Buffer<ffi::S32> kv_lens, ffi::Buffer<ffi::S32> /*cu_q_lens*/,
                                         int32_t num_tokens, int32_t group, int32_t /*capacity*/,
                                         int32_t /*decode_only*/, ffi::Result<ffi::Buffer<ffi::S32>> plan) {
  JP_RETURN_IF_ERROR(check_dim(int64_t(plan->element_count()),
                               paged_plan_ints(num_tokens, group, int64_t(kv_lens.element_count())), "plan size"));
  std::fill(plan->typed_data(), plan->typed_data() + plan->element_count(), 0);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_paged_attention_cpu, paged_attention_cpu_impl,
                              paged_attention_binding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_paged_attention_plan_cpu, paged_attention_plan_cpu_impl,
                              paged_attention_plan_binding());

}  // namespace jaxpaged
