// The FFI signature of paged attention, and its decoding into PagedAttentionParams.
// CPU and GPU handlers share both, so the two targets can never disagree on arguments.
#pragma once

#include "common/ffi_helpers.h"
#include "paged_attention/params.h"
#include "paged_attention/workspace.h"

namespace jaxpaged {

// Operands, attributes and the two results every platform has. A GPU handler appends its
// split-KV workspace result and its stream to this.
inline auto paged_attention_binding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()          // q
      .Arg<ffi::AnyBuffer>()          // k_cache
      .Arg<ffi::AnyBuffer>()          // v_cache
      .Arg<ffi::Buffer<ffi::S32>>()   // kv_lens
      .Arg<ffi::Buffer<ffi::S32>>()   // block_tables
      .Arg<ffi::Buffer<ffi::S32>>()   // cu_q_lens
      .Arg<ffi::Buffer<ffi::S32>>()   // options: traced options (params.h), or empty
      .Arg<ffi::Buffer<ffi::S32>>()   // plan (jaxpaged.paged_attention_plan), or empty
      .Attr<float>("scale")
      .Attr<float>("soft_cap")
      .Attr<int32_t>("sliding_window")
      .Attr<float>("k_scale")
      .Attr<float>("v_scale")
      .Attr<int32_t>("kv_layout")     // 0: NHD, 1: HND
      .Attr<int32_t>("decode_only")
      .Attr<int32_t>("plan_tokens")    // the plan's query rows T (with plan_group < 1: no plan)
      .Attr<int32_t>("plan_group")     // its query heads per KV head
      .Attr<int32_t>("plan_capacity")  // its key positions per sequence (max_pages x page_size)
      .Ret<ffi::AnyBuffer>()          // out
      .Ret<ffi::Buffer<ffi::F32>>();  // lse
}

// The plan to use for a decoded call, or null: one made for this call's rows, sequences, GQA
// group and key capacity (its size says the sequences). A call under sharding or vmap may differ
// from the one the plan was made for (fewer sequences); it then lists its own tiles. (A call with
// its KV heads sharded keeps rows, sequences and group: the plan's list is its own.)
inline const int32_t* paged_plan_for(const PagedAttentionParams& p, ffi::Buffer<ffi::S32> plan, int32_t plan_tokens,
                                     int32_t plan_group, int32_t plan_capacity) {
  const int64_t group = p.num_q_heads / p.num_kv_heads;
  if (plan_group < 1 || int64_t(plan_tokens) != p.num_tokens || int64_t(plan_group) != group ||
      int64_t(plan_capacity) != p.max_pages * p.page_size ||
      int64_t(plan.element_count()) != paged_plan_ints(p.num_tokens, group, p.num_seqs)) {
    return nullptr;
  }
  return plan.typed_data();
}

// The plan op (jaxpaged.paged_attention_plan): kv_lens, cu_q_lens and the shapes the tile list
// depends on -> the list.
inline auto paged_attention_plan_binding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::Buffer<ffi::S32>>()   // kv_lens [S]
      .Arg<ffi::Buffer<ffi::S32>>()   // cu_q_lens [S + 1], or empty for pure decode
      .Attr<int32_t>("num_tokens")    // the calls' query rows T
      .Attr<int32_t>("group")         // query heads per KV head
      .Attr<int32_t>("capacity")      // key positions per sequence (max_pages x page_size)
      .Attr<int32_t>("decode_only")
      .Ret<ffi::Buffer<ffi::S32>>();  // plan [paged_plan_ints(T, group, S)]
}

inline ffi::Error decode_paged_attention(
    ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::Buffer<ffi::S32> kv_lens,
    ffi::Buffer<ffi::S32> block_tables, ffi::Buffer<ffi::S32> cu_q_lens,
    ffi::Buffer<ffi::S32> options, float scale,
    float soft_cap, int32_t sliding_window, float k_scale, float v_scale, int32_t kv_layout,
    int32_t decode_only,
    ffi::Result<ffi::AnyBuffer>& out, ffi::Result<ffi::Buffer<ffi::F32>>& lse,
    PagedAttentionParams* p) {
  JP_RETURN_IF_ERROR(check_rank(q.dimensions(), 3, "q"));
  JP_RETURN_IF_ERROR(check_rank(k.dimensions(), 4, "k_cache"));
  JP_RETURN_IF_ERROR(check_rank(v.dimensions(), 4, "v_cache"));
  JP_RETURN_IF_ERROR(check_rank(kv_lens.dimensions(), 1, "kv_lens"));
  JP_RETURN_IF_ERROR(check_rank(block_tables.dimensions(), 2, "block_tables"));
  JP_RETURN_IF_ERROR(check_rank(cu_q_lens.dimensions(), 1, "cu_q_lens"));
  const bool fp8_cache = k.element_type() == ffi::DataType::F8E4M3FN || k.element_type() == ffi::DataType::F8E5M2;
  if ((k.element_type() != q.element_type() && !fp8_cache) || v.element_type() != k.element_type() ||
      out->element_type() != q.element_type()) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: q and out must share a dtype, and k_cache and v_cache q's dtype or one fp8 dtype");
  }
  const auto qd = q.dimensions(), kd = k.dimensions();
  if (kv_layout != 0 && kv_layout != 1) {
    return ffi::Error::InvalidArgument("jaxpaged: kv_layout attribute must be 0 (NHD) or 1 (HND)");
  }
  const bool hnd = kv_layout == 1;
  p->num_tokens = qd[0];
  p->num_q_heads = qd[1];
  p->head_dim = qd[2];
  p->num_pages = kd[0];
  p->page_size = hnd ? kd[2] : kd[1];
  p->num_kv_heads = hnd ? kd[1] : kd[2];
  p->num_seqs = kv_lens.dimensions()[0];
  p->max_pages = block_tables.dimensions()[1];
  for (size_t i = 0; i < 4; ++i) {
    JP_RETURN_IF_ERROR(check_dim(v.dimensions()[i], kd[i], "a v_cache dimension"));
  }
  JP_RETURN_IF_ERROR(check_dim(kd[3], p->head_dim, "k_cache's head dim"));
  if (p->num_kv_heads <= 0 || p->num_q_heads % p->num_kv_heads != 0) {
    return ffi::Error::InvalidArgument("jaxpaged: num_q_heads must be a multiple of num_kv_heads");
  }
  JP_RETURN_IF_ERROR(check_dim(block_tables.dimensions()[0], p->num_seqs, "block_tables rows"));
  // Pure decode reads no cu_q_lens (row t is sequence t): the operand is then empty.
  JP_RETURN_IF_ERROR(check_dim(cu_q_lens.dimensions()[0], decode_only ? 0 : p->num_seqs + 1, "cu_q_lens length"));
  if (decode_only) JP_RETURN_IF_ERROR(check_dim(p->num_tokens, p->num_seqs, "decode num_tokens"));
  JP_RETURN_IF_ERROR(check_rank(out->dimensions(), 3, "out"));
  for (size_t i = 0; i < 3; ++i) JP_RETURN_IF_ERROR(check_dim(out->dimensions()[i], qd[i], "an out dimension"));
  JP_RETURN_IF_ERROR(check_dim(int64_t(lse->element_count()), qd[0] * qd[1], "lse size"));

  p->head_stride = hnd ? p->page_size * p->head_dim : p->head_dim;
  p->slot_stride = hnd ? p->head_dim : p->num_kv_heads * p->head_dim;
  p->page_stride = p->page_size * p->num_kv_heads * p->head_dim;
  p->q = q.untyped_data();
  p->k_cache = k.untyped_data();
  p->v_cache = v.untyped_data();
  p->kv_lens = kv_lens.typed_data();
  p->block_tables = block_tables.typed_data();
  p->cu_q_lens = cu_q_lens.typed_data();
  p->out = out->untyped_data();
  p->lse = lse->typed_data();
  p->scale = scale;
  p->soft_cap = soft_cap;
  p->sliding_window = sliding_window;
  p->k_scale = k_scale;
  p->v_scale = v_scale;
  JP_RETURN_IF_ERROR(decode_options(options, PagedOptions::kWords, &p->options));
  p->decode_only = decode_only != 0;
  p->kv_e5m2 = k.element_type() == ffi::DataType::F8E5M2;
  return ffi::Error::Success();
}

}  // namespace jaxpaged
