// Reading cached MLA tokens on the host (CPU handlers of mla_decode and mla_decode_sparse), in
// every cache format: q's dtype, fp8 scaled by kv_scale, or DeepSeek-V3.2's 656-byte rows.
#pragma once

#include <cstring>

#include "common/ffi_helpers.h"
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
    for (int64_t d = 0; d < DL; ++d) latent[d] = e4m3_to_float(row[d]) * scales[d / 128];
    for (int64_t d = 0; d < DR; ++d) rope[d] = load_float(row + kMlaDsRopeAt, d, Dtype::kBF16);
    return;
  }
  const float ckv_mul = is_fp8(f.ckv) ? f.kv_scale : 1.f, kpe_mul = is_fp8(f.kpe) ? f.kv_scale : 1.f;
  for (int64_t d = 0; d < DL; ++d)
    latent[d] = load_float(p.ckv, page * p.ckv_page_stride + slot * p.ckv_slot_stride + d, f.ckv) * ckv_mul;
  for (int64_t d = 0; d < DR; ++d)
    rope[d] = load_float(p.kpe, page * p.kpe_page_stride + slot * p.kpe_slot_stride + d, f.kpe) * kpe_mul;
}

// The caches' format of a decoded call, or false if a dtype has no CPU reader.
inline bool mla_cache_format(const MlaDecodeParams& p, ffi::DataType ckv, ffi::DataType kpe, MlaCacheFormat* f) {
  f->kv_scale = mla_kv_scale(p);
  f->ckv = f->kpe = Dtype::kF32;
  return p.ds_rows || (to_cache_dtype(ckv, &f->ckv) && to_cache_dtype(kpe, &f->kpe));
}

}  // namespace jaxpaged
