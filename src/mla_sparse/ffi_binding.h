// The FFI signature of sparse (top-k) MLA decode and its decoding. The queries, caches, out, lse
// and options are MLA decode's (mla_decode/ffi_binding.h); instead of lengths and block tables,
// each query row has its own list of token slots.
#pragma once

#include "mla_decode/ffi_binding.h"

namespace jaxpaged {

struct MlaSparseParams {
  MlaDecodeParams mla;          // kv_lens, block_tables, max_pages and causal are unused
  const int32_t* indices;       // [batch, s_q, topk] token slots page * page_size + offset
  const int32_t* topk_lens;     // [batch], or nullptr: every index counts
  int64_t topk;
};

inline auto mla_sparse_binding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()          // q_nope
      .Arg<ffi::AnyBuffer>()          // q_pe
      .Arg<ffi::AnyBuffer>()          // ckv_cache
      .Arg<ffi::AnyBuffer>()          // kpe_cache (or ckv_cache again)
      .Arg<ffi::Buffer<ffi::S32>>()   // indices [B, s_q, topk]
      .Arg<ffi::Buffer<ffi::S32>>()   // topk_lens [B], or empty
      .Arg<ffi::Buffer<ffi::S32>>()   // options: traced options (mla_decode/params.h), or empty
      .Arg<ffi::Buffer<ffi::S32>>()   // plan (jaxpaged.mla_decode_sparse_plan), or empty
      .Attr<float>("scale")
      .Attr<float>("kv_scale")
      .Attr<int32_t>("ds_read")        // 656-byte rows: 0 float32, 1 bf16, 2 f16 (mla_decode/params.h)
      .Attr<int32_t>("fp8_math")       // fp8 caches: the products may run in fp8 (mla_decode/params.h)
      .Attr<int32_t>("plan_rows")      // the plan's query rows per list (Hq; 0: no plan)
      .Attr<int32_t>("plan_capacity")  // the plan's longest list (topk)
      .Ret<ffi::AnyBuffer>()          // out
      .Ret<ffi::Buffer<ffi::F32>>();  // lse
}

inline ffi::Error decode_mla_sparse(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv,
                                    ffi::AnyBuffer kpe, ffi::Buffer<ffi::S32> indices,
                                    ffi::Buffer<ffi::S32> topk_lens, ffi::Buffer<ffi::S32> options, float scale,
                                    float kv_scale, int32_t ds_read, int32_t fp8_math,
                                    ffi::Result<ffi::AnyBuffer>& out, ffi::Result<ffi::Buffer<ffi::F32>>& lse,
                                    MlaSparseParams* p) {
  JP_RETURN_IF_ERROR(decode_mla_queries_and_caches(q_nope, q_pe, ckv, kpe, options, scale, kv_scale, ds_read, out, lse,
                                                   &p->mla));
  JP_RETURN_IF_ERROR(decode_mla_fp8_math(fp8_math, &p->mla));
  JP_RETURN_IF_ERROR(check_rank(indices.dimensions(), 3, "indices"));
  JP_RETURN_IF_ERROR(check_dim(indices.dimensions()[0], p->mla.batch, "indices' batch"));
  JP_RETURN_IF_ERROR(check_dim(indices.dimensions()[1], p->mla.s_q, "indices' s_q"));
  p->topk = indices.dimensions()[2];
  p->indices = indices.typed_data();
  const int64_t lens = int64_t(topk_lens.element_count());
  if (lens != 0) JP_RETURN_IF_ERROR(check_dim(lens, p->mla.batch, "topk_lens length"));
  p->topk_lens = lens == 0 ? nullptr : topk_lens.typed_data();
  return ffi::Error::Success();
}

// The plan to use for a decoded sparse call, or null: one made for this call's lists
// (jaxpaged.mla_decode_sparse_plan: the dense plan op over the B x s_q lists' lengths, Hq rows each,
// capacity topk - the schedule the call would make), else the call computes its own (the same).
inline const int32_t* mla_sparse_plan_for(const MlaSparseParams& p, ffi::Buffer<ffi::S32> plan, int32_t plan_rows,
                                          int32_t plan_capacity) {
  return mla_plan_fitting(plan, plan_rows, plan_capacity, p.mla.batch * p.mla.s_q, p.mla.num_heads, p.topk);
}

}  // namespace jaxpaged
