// Everything an MLA-decode kernel needs, decoded once from the FFI call by the handler.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace jaxpaged {

constexpr int kMlaLatentDim = 512;  // compressed KV width, also the value width
constexpr int kMlaRopeDim = 64;     // rotary part of the key

struct MlaDecodeParams {
  const void* q_nope;           // [batch, s_q, num_heads, 512]
  const void* q_pe;             // [batch, s_q, num_heads, 64]
  const void* ckv;              // latent part of each cached token (512 elements)
  const void* kpe;              // rope part of each cached token (64 elements); may alias ckv + 512
  const int32_t* kv_lens;       // [batch]
  const int32_t* block_tables;  // [batch, max_pages]
  void* out;                    // [batch, s_q, num_heads, 512], q's dtype
  float* lse;                   // [batch, s_q, num_heads]

  int64_t batch, s_q, num_heads;
  int64_t max_pages, num_pages, page_size;
  // Element strides of a page and a slot, separately for the two parts (equal for the
  // combined 576-wide layout, where kpe points 512 elements into each ckv row).
  int64_t ckv_page_stride, ckv_slot_stride, kpe_page_stride, kpe_slot_stride;

  float scale;             // the attribute's value, unless `options` is set
  const int32_t* options;  // traced options (device array {scale bits}), or nullptr
  bool causal;
};

constexpr int kMlaOptionWords = 1;

// The call's score scale, wherever it travels.
JP_HOST_DEVICE float mla_scale(const MlaDecodeParams& p) {
  return p.options == nullptr ? p.scale : float_from_bits(p.options[0]);
}

}  // namespace jaxpaged
