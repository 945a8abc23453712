// Everything a paged-attention kernel needs, decoded once from the FFI call by the handler.
// The CPU handler and the GPU launcher take the same struct.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace jaxpaged {

struct PagedAttentionParams {
  const void* q;                // [num_tokens, num_q_heads, head_dim]
  const void* k_cache;          // paged; addressed through the strides below; q's dtype or fp8
  const void* v_cache;          // same layout and dtype as k_cache
  const int32_t* kv_lens;       // [num_seqs]
  const int32_t* block_tables;  // [num_seqs, max_pages]
  const int32_t* cu_q_lens;     // [num_seqs + 1]; unread (and empty) when decode_only
  void* out;                    // [num_tokens, num_q_heads, head_dim], q's dtype
  float* lse;                   // [num_tokens, num_q_heads]

  int64_t num_tokens, num_q_heads, num_kv_heads, head_dim;
  int64_t num_seqs, max_pages, num_pages, page_size;
  // Element strides of one page, one slot within a page and one kv head. Both kv layouts
  // ("NHD" [pages, page, heads, D] and "HND" [pages, heads, page, D]) are only these strides.
  int64_t page_stride, slot_stride, head_stride;

  // The options, from the call's attributes; or, when `options` is set (traced options), from
  // that device array: {scale, soft_cap bits, sliding_window, k_scale, v_scale bits} (kWords words).
  float scale;
  float soft_cap;         // <= 0: none
  int32_t sliding_window; // <= 0: none
  float k_scale, v_scale; // fp8 caches: a key is k_cache * k_scale, a value v_cache * v_scale
  const int32_t* options; // nullptr: the three fields above hold the options
  bool decode_only;       // one query row per sequence: row t is sequence t
  bool kv_e5m2;           // fp8 caches: float8_e5m2 (else float8_e4m3fn); unread otherwise
};

struct PagedOptions {
  static constexpr int kWords = 5;
  float scale, soft_cap;
  int32_t sliding_window;
  float k_scale, v_scale;
};

// The call's options, wherever they travel (read once per block on the GPU).
JP_HOST_DEVICE PagedOptions paged_options(const PagedAttentionParams& p) {
  if (p.options == nullptr) return {p.scale, p.soft_cap, p.sliding_window, p.k_scale, p.v_scale};
  return {float_from_bits(p.options[0]), float_from_bits(p.options[1]), p.options[2],
          float_from_bits(p.options[3]), float_from_bits(p.options[4])};
}

}  // namespace jaxpaged
