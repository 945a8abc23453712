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
  float kv_scale;          // fp8 caches: a cached value is its fp8 value * kv_scale (rope too, if fp8)
  const int32_t* options;  // traced options (device array {scale, kv_scale bits}), or nullptr
  bool causal;
  // DeepSeek-V3.2's rows (uint8 [.., 656]; ckv and kpe then point at the same rows, strides in
  // bytes): 512 e4m3 latent values, 4 float32 scales (one per 128), 64 bfloat16 rope values.
  bool ds_rows;
  // 656-byte rows read with bf16 dequantization (ds_dequant="bfloat16"; not with f16 queries): each
  // latent value is e4m3 value x group scale rounded to bfloat16, as FlashMLA's kernels read them.
  bool ds_bf16 = false;
  // 656-byte rows read with f16 dequantization (ds_dequant="float16"; any query dtype, the wide kernel
  // with bf16 queries, the portable one with float16 queries): each
  // latent value is f16(e4m3 value x f16(group scale)) - the scale rounded to float16, then the
  // product (nearest even, subnormals kept, past 65504 infinite).
  bool ds_f16 = false;
  // The readings from the kernels' ds_read attribute (0 float32, 1 bfloat16, 2 float16).
  void set_ds_read(int ds_read) {
    ds_bf16 = ds_read == 1;
    ds_f16 = ds_read == 2;
  }
  // fp8 caches (mla_decode(..., fp8_math=True)): the products may run in fp8 - queries rounded to
  // e4m3 at a power of two per row, probabilities rounded to e4m3 (the wide fp8 kernel's kF8 mode,
  // FlashMLA's fp8 arithmetic); kernels without such a mode compute as without it.
  bool fp8_math = false;
  // An fp8 latent cache (float8_e4m3fn, or float8_e5m2 when kv_e5m2); kpe_fp8: its rope is fp8
  // too (the combined 576 layout), else a 16-bit kpe cache of q's dtype.
  bool fp8, kv_e5m2, kpe_fp8;

  // Sparse calls (mla_decode_sparse) as the Hopper kernel sees them (mla_sparse_as_lists):
  // `batch` counts index lists (the op's B * s_q query tokens, s_q = 1 here), list b's tokens
  // are the slots indices[b * topk ..] (page * page_size + offset; outside [0, num_pages *
  // page_size): no key), its length topk_lens[b / lens_every] clamped to [0, topk] (topk when
  // topk_lens is null).
  bool sparse = false;
  const int32_t* indices = nullptr;
  const int32_t* topk_lens = nullptr;
  int64_t topk = 0, lens_every = 1;
  bool q_bf16 = false;  // q's dtype is bfloat16 (else float16)
  // Hopper path, dependent launches (dependent_launches): the attention kernel lets the merge
  // kernel launch as soon as it starts (else once its blocks exit). Early suits a merge grid large
  // enough to spread over the SMs as they free up; a small one (a batch of one or two long
  // sequences) would pile onto the first SMs to free and run slower (launch_hopper decides).
  bool early_dependents = false;
  // ... and the attention kernel is itself launched as a dependent, of the schedule kernel this
  // call launched just before it (a plan: no schedule kernel, a plain launch - a dependent launch
  // behind a kernel that never lets it start early gains nothing, and as the first kernel of a
  // call it measured slower per call on a paged config, NOTES item 46).
  bool dependent_attention = false;
#if defined(JAXPAGED_MLA_TRACE)
  uint64_t* trace = nullptr;  // the timeline probe's records (sm90/trace.cuh; tools/mla_trace.cu only)
#endif
};

// Cache formats, as kernels' template parameters (what MlaDecodeParams' flags say).
constexpr int kMlaSame = 0;    // q's 16-bit dtype, split or combined
constexpr int kMlaFp8 = 1;     // fp8 latent (+ fp8 or 16-bit rope), per-tensor kv_scale
constexpr int kMlaDsRows = 2;  // 656-byte rows
JP_HOST_DEVICE int mla_format(const MlaDecodeParams& p) { return p.ds_rows ? kMlaDsRows : (p.fp8 ? kMlaFp8 : kMlaSame); }

// Whether the cache holds quantized values (fp8 or 656-byte rows).
JP_HOST_DEVICE bool mla_quantized(const MlaDecodeParams& p) { return p.fp8 || p.ds_rows; }

// Whether the Hopper kernel (sm90/) reads this cache: 16-bit caches; fp8 with an fp8 rope (one
// kv_scale for the whole key, folded into the score scale and the output); 656-byte rows read with
// bf16 dequantization (ds_bf16: the wgmma kernel's loader, or the wide kernel in registers,
// multiplies a token's values by their group scales and rounds them to bf16, the reference's rule
// for that option). Others take the portable kernel: an
// fp8 latent beside a 16-bit rope, and 656-byte rows read exactly (value x scale in float32: the
// scale is per key and per 128 columns, so it cannot leave the tensor-core products; NOTES item 39).
// The float16 reading (ds_f16) has one Hopper kernel, the wide one (dense pages of >= 64 tokens, or
// sparse lists: mla_ds_wide_shape); elsewhere it takes the portable kernel.
JP_HOST_DEVICE bool mla_ds_wide_shape(const MlaDecodeParams& p) { return p.sparse || p.page_size >= 64; }
// 656-byte rows with fp8_math=True, bf16 queries, dense in pages of >= 64 tokens or sparse lists
// over any page size: the wide kernel's fp8-math mode (fp8_wide.cuh's kDF), whatever ds_dequant says.
JP_HOST_DEVICE bool mla_ds_fp8_math_shape(const MlaDecodeParams& p) {
  return p.ds_rows && p.fp8_math && p.q_bf16 && mla_ds_wide_shape(p);
}
JP_HOST_DEVICE bool mla_hopper_format(const MlaDecodeParams& p) {
  if (p.ds_rows) {
    return p.q_bf16 && (p.ds_bf16 || (p.ds_f16 && mla_ds_wide_shape(p)) || mla_ds_fp8_math_shape(p));
  }
  return !p.fp8 || p.kpe_fp8;
}

// The narrow fp8 kernel (sm90/fp8_narrow.cuh; on by default, JAXPAGED_MLA_FP8_NARROW=0 opts out)
// can read this call on Hopper: bf16 queries, at most
// kNarrowQueries query rows per sequence, a dense per-tensor fp8 cache in the combined 576-byte
// layout (rope fp8 too, right after the latent) in pages of >= 64 tokens.
constexpr int kNarrowQueries = 16;
// The raw-tile fp8 kernels' common condition: bf16 queries, a dense per-tensor fp8 cache in the
// combined 576-byte layout (rope fp8 too, right after the latent) in pages of >= 64 tokens.
inline bool mla_fp8_raw_tiles_apply(const MlaDecodeParams& p) {
  const bool combined = static_cast<const unsigned char*>(p.kpe) == static_cast<const unsigned char*>(p.ckv) + 512 &&
                        p.kpe_page_stride == p.ckv_page_stride && p.kpe_slot_stride == p.ckv_slot_stride;
  return p.fp8 && p.kpe_fp8 && combined && p.q_bf16 && !p.sparse && !p.ds_rows && p.page_size >= 64 &&
         p.num_pages >= 1;
}
inline bool mla_fp8_narrow_applies(const MlaDecodeParams& p) {
  return mla_fp8_raw_tiles_apply(p) && p.s_q * p.num_heads <= kNarrowQueries;
}
// The wide fp8 kernel (sm90/fp8_wide.cuh; on by default, JAXPAGED_MLA_FP8_WIDE=0 opts out): the
// same caches, more query rows (64 per block).
inline bool mla_fp8_wide_applies(const MlaDecodeParams& p) {
  return mla_fp8_raw_tiles_apply(p) && p.s_q * p.num_heads > kNarrowQueries;
}

constexpr int kMlaOptionWords = 2;
constexpr int kMlaDsRowBytes = 656, kMlaDsScalesAt = 512, kMlaDsRopeAt = 528;

// The wide kernel on DeepSeek-V3.2's 656-byte rows (fp8_wide.cuh's kDs, NOTES item 49;
// JAXPAGED_MLA_DS_WIDE=0 opts out of it for the bf16 reading): read with ds_dequant="bfloat16" (bf16
// products) or "float16" (f16 products; its only Hopper kernel), bf16 queries, any number of
// query rows (<= 16 - DeepSeek-V3.2 at TP 8 - use at most a quarter of a 64-row block, and still
// measured 1.35-1.7x faster than the wgmma kernel, whose loader converts each tile in shared
// memory: NOTES item 50 d); a dense cache in pages of >= 64 tokens (TMA), or sparse index lists
// over any page size (gathered).
inline bool mla_ds_wide_applies(const MlaDecodeParams& p) {
  return p.ds_rows && (p.ds_bf16 || p.ds_f16) && p.q_bf16 && mla_ds_wide_shape(p) && p.num_pages >= 1;
}
// ... and its fp8-math mode (kDF): mla_ds_fp8_math_shape with pages to read (on by default; not
// affected by JAXPAGED_MLA_DS_WIDE).
inline bool mla_ds_fp8_math_applies(const MlaDecodeParams& p) { return mla_ds_fp8_math_shape(p) && p.num_pages >= 1; }

// The call's score scale, wherever it travels.
JP_HOST_DEVICE float mla_scale(const MlaDecodeParams& p) {
  return p.options == nullptr ? p.scale : float_from_bits(p.options[0]);
}

JP_HOST_DEVICE float mla_kv_scale(const MlaDecodeParams& p) {
  return p.options == nullptr ? p.kv_scale : float_from_bits(p.options[1]);
}

}  // namespace jaxpaged
