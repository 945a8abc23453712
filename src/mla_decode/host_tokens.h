// Reading cached MLA tokens on the host (CPU handlers of mla_decode and mla_decode_sparse), in
// every cache format: q's dtype, fp8 scaled by kv_scale, or DeepSeek-V3.2's 656-byte rows.
#pragma once

#include <cstring>

#include <vector>

#include "common/ffi_helpers.h"
#include "common/host_softmax.h"
#include "mla_decode/params.h"

namespace jaxpaged {

// How the caches store a token: their dtypes (q's, or fp8 scaled by kv_scale) or DeepSeek's rows.
struct MlaCacheFormat {
  Dtype ckv, kpe;
  float kv_scale;
};

// One cached token's 512 latent and 64 rope values as floats.
inline void load_token(const MlaDecodeParams& p, const MlaCacheFormat& f, int64_t page, int64_t slot, float* latent,
                float* rope) {
  constexpr int64_t DL = kMlaLatentDim, DR = kMlaRopeDim;
  if (p.ds_rows) {
    const uint8_t* row = static_cast<const uint8_t*>(p.ckv) + page * p.ckv_page_stride + slot * p.ckv_slot_stride;
    float scales[4];
    std::memcpy(scales, row + kMlaDsScalesAt, sizeof scales);  // little-endian float32, as the host's
    for (int64_t d = 0; d < DL; ++d) {
      const float e = e4m3_to_float(row[d]), v = e * scales[d / 128];
      if (p.ds_f16) {  // f16(value x f16(scale)): the float32 product of the two is exact
        latent[d] = f16_to_float(float_to_f16(e * f16_to_float(float_to_f16(scales[d / 128]))));
      } else {
        latent[d] = p.ds_bf16 ? bf16_to_float(float_to_bf16(v)) : v;  // (ds_bf16: rounded to bfloat16)
      }
    }
    for (int64_t d = 0; d < DR; ++d) rope[d] = load_float(row + kMlaDsRopeAt, d, Dtype::kBF16);
    return;
  }
  const float ckv_mul = is_fp8(f.ckv) ? f.kv_scale : 1.f, kpe_mul = is_fp8(f.kpe) ? f.kv_scale : 1.f;
  for (int64_t d = 0; d < DL; ++d)
    latent[d] = load_float(p.ckv, page * p.ckv_page_stride + slot * p.ckv_slot_stride + d, f.ckv) * ckv_mul;
  for (int64_t d = 0; d < DR; ++d)
    rope[d] = load_float(p.kpe, page * p.kpe_page_stride + slot * p.kpe_slot_stride + d, f.kpe) * kpe_mul;
}

// Every head of query `query` (= b * s_q + i) over the n gathered tokens (latent [n, 512], rope
// [n, 64]): float32 scores, softmax, and the latent as the value. No key: output 0 and lse -inf;
// bad: NaN.
inline void mla_attend_heads(const MlaDecodeParams& p, Dtype dt, int64_t query, int64_t n, bool bad,
                             const float* latent, const float* rope, float scale, HostSoftmax& softmax) {
  constexpr int64_t DL = kMlaLatentDim, DR = kMlaRopeDim;
  std::vector<float> qn(DL), qr(DR);
  for (int64_t h = 0; h < p.num_heads; ++h) {
    const int64_t row = query * p.num_heads + h;
    if (bad || n == 0) {
      softmax.empty_row(bad, p.out, row, p.lse, dt);
      continue;
    }
    for (int64_t d = 0; d < DL; ++d) qn[d] = load_float(p.q_nope, row * DL + d, dt);
    for (int64_t d = 0; d < DR; ++d) qr[d] = load_float(p.q_pe, row * DR + d, dt);
    const auto score = [&](int64_t j) {
      float dot = 0.f;
      for (int64_t d = 0; d < DL; ++d) dot += qn[d] * latent[j * DL + d];
      for (int64_t d = 0; d < DR; ++d) dot += qr[d] * rope[j * DR + d];
      return dot * scale;
    };
    softmax.row(n, score, latent, p.out, row, p.lse, dt);
  }
}

// The caches' format of a decoded call, or false if a dtype has no CPU reader.
inline bool mla_cache_format(const MlaDecodeParams& p, ffi::DataType ckv, ffi::DataType kpe, MlaCacheFormat* f) {
  f->kv_scale = mla_kv_scale(p);
  f->ckv = f->kpe = Dtype::kF32;
  return p.ds_rows || (to_cache_dtype(ckv, &f->ckv) && to_cache_dtype(kpe, &f->kpe));
}

}  // namespace jaxpaged
