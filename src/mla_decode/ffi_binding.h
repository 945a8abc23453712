// The FFI signature of MLA decode, and its decoding into MlaDecodeParams (shared by all platforms).
#pragma once

#include "common/ffi_helpers.h"
#include "mla_decode/params.h"
#include "mla_decode/workspace.h"

namespace jaxpaged {

// For the combined cache layout ([pages, page, 576], FlashMLA's) the caller passes the same
// buffer as ckv_cache and kpe_cache; the rope part is then addressed 512 elements into each row.
inline auto mla_decode_binding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()          // q_nope
      .Arg<ffi::AnyBuffer>()          // q_pe
      .Arg<ffi::AnyBuffer>()          // ckv_cache
      .Arg<ffi::AnyBuffer>()          // kpe_cache (or ckv_cache again, combined layout)
      .Arg<ffi::Buffer<ffi::S32>>()   // kv_lens
      .Arg<ffi::Buffer<ffi::S32>>()   // block_tables
      .Arg<ffi::Buffer<ffi::S32>>()   // options: traced options (params.h), or empty
      .Arg<ffi::Buffer<ffi::S32>>()   // plan (jaxpaged.mla_decode_plan), or empty
      .Attr<float>("scale")
      .Attr<float>("kv_scale")
      .Attr<int32_t>("ds_read")        // 656-byte rows: 0 float32, 1 bf16, 2 f16 dequantization (params.h)
      .Attr<int32_t>("fp8_math")       // fp8 caches: the products may run in fp8 (params.h)
      .Attr<int32_t>("causal")
      .Attr<int32_t>("plan_rows")      // the plan's query rows per sequence (s_q x Hq; 0: no plan)
      .Attr<int32_t>("plan_capacity")  // its cache positions per sequence (max_pages x page_size)
      .Ret<ffi::AnyBuffer>()          // out
      .Ret<ffi::Buffer<ffi::F32>>();  // lse
}

// The plan to use for a decoded call, or null: one made for this call's batch (its size),
// query rows and cache capacity. A call under sharding or vmap may be smaller than the one the
// plan was made for; it then computes its own schedule (the same one it would have got).
// (batch, rows, capacity: what the call's schedule is made for - mla_sparse_plan_for's lists too)
inline const int32_t* mla_plan_fitting(ffi::Buffer<ffi::S32> plan, int32_t plan_rows, int32_t plan_capacity,
                                       int64_t batch, int64_t rows, int64_t capacity) {
  if (plan_rows <= 0 || int64_t(plan.element_count()) != mla_plan_ints(batch) || int64_t(plan_rows) != rows ||
      int64_t(plan_capacity) != capacity) {
    return nullptr;
  }
  return plan.typed_data();
}
inline const int32_t* mla_plan_for(const MlaDecodeParams& p, ffi::Buffer<ffi::S32> plan, int32_t plan_rows,
                                   int32_t plan_capacity) {
  return mla_plan_fitting(plan, plan_rows, plan_capacity, p.batch, p.s_q * p.num_heads, p.max_pages * p.page_size);
}

// The plan op (jaxpaged.mla_decode_plan): kv_lens and the shapes it depends on -> the schedule.
inline auto mla_decode_plan_binding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::Buffer<ffi::S32>>()   // kv_lens
      .Attr<int32_t>("rows")          // query rows per sequence (s_q x Hq)
      .Attr<int32_t>("capacity")      // cache positions per sequence (max_pages x page_size)
      .Ret<ffi::Buffer<ffi::S32>>();  // plan [mla_plan_ints(batch)]
}

// What dense and sparse MLA decode share: queries, caches (every format), out, lse and options.
inline ffi::Error decode_mla_queries_and_caches(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv,
                                                ffi::AnyBuffer kpe, ffi::Buffer<ffi::S32> options, float scale,
                                                float kv_scale, int32_t ds_read, ffi::Result<ffi::AnyBuffer>& out,
                                                ffi::Result<ffi::Buffer<ffi::F32>>& lse, MlaDecodeParams* p) {
  JP_RETURN_IF_ERROR(check_rank(q_nope.dimensions(), 4, "q_nope"));
  JP_RETURN_IF_ERROR(check_rank(q_pe.dimensions(), 4, "q_pe"));
  JP_RETURN_IF_ERROR(check_rank(ckv.dimensions(), 3, "ckv_cache"));
  JP_RETURN_IF_ERROR(check_rank(kpe.dimensions(), 3, "kpe_cache"));
  const auto dt = q_nope.element_type(), cache_dt = ckv.element_type();
  const bool fp8_cache = cache_dt == ffi::DataType::F8E4M3FN || cache_dt == ffi::DataType::F8E5M2;
  p->ds_rows = cache_dt == ffi::DataType::U8;
  if (q_pe.element_type() != dt || out->element_type() != dt || (cache_dt != dt && !fp8_cache && !p->ds_rows) ||
      (kpe.element_type() != dt && kpe.element_type() != cache_dt)) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: MLA queries and out must share a dtype; the caches q's dtype, fp8 or uint8 (656-byte rows)");
  }
  const auto qd = q_nope.dimensions(), cd = ckv.dimensions();
  p->batch = qd[0];
  p->s_q = qd[1];
  p->num_heads = qd[2];
  JP_RETURN_IF_ERROR(check_dim(qd[3], kMlaLatentDim, "q_nope's last dim"));
  for (size_t i = 0; i < 3; ++i) JP_RETURN_IF_ERROR(check_dim(q_pe.dimensions()[i], qd[i], "a q_pe dimension"));
  JP_RETURN_IF_ERROR(check_dim(q_pe.dimensions()[3], kMlaRopeDim, "q_pe's last dim"));
  p->num_pages = cd[0];
  p->page_size = cd[1];
  const bool combined = cd[2] == kMlaLatentDim + kMlaRopeDim || p->ds_rows;
  if (p->ds_rows) {
    JP_RETURN_IF_ERROR(check_dim(cd[2], kMlaDsRowBytes, "the uint8 ckv_cache's last dim"));
  } else if (!combined) {
    JP_RETURN_IF_ERROR(check_dim(cd[2], kMlaLatentDim, "ckv_cache's last dim"));
    // A split rope is 16-bit (q's dtype): an fp8 rope comes only inside a combined 576-wide cache
    // (the kernels read a split rope as 64 two-byte values).
    if (kpe.element_type() != dt) {
      return ffi::Error::InvalidArgument(
          "jaxpaged: a split kpe_cache holds q's dtype (an fp8 rope needs the combined [P, page, 576] cache)");
    }
    JP_RETURN_IF_ERROR(check_dim(kpe.dimensions()[0], cd[0], "kpe_cache's page count"));
    JP_RETURN_IF_ERROR(check_dim(kpe.dimensions()[1], cd[1], "kpe_cache's page size"));
    JP_RETURN_IF_ERROR(check_dim(kpe.dimensions()[2], kMlaRopeDim, "kpe_cache's last dim"));
  }
  JP_RETURN_IF_ERROR(check_rank(out->dimensions(), 4, "out"));
  for (size_t i = 0; i < 4; ++i) JP_RETURN_IF_ERROR(check_dim(out->dimensions()[i], qd[i], "an out dimension"));
  JP_RETURN_IF_ERROR(check_dim(int64_t(lse->element_count()), qd[0] * qd[1] * qd[2], "lse size"));

  const int64_t row = cd[2];
  p->ckv_slot_stride = row;
  p->ckv_page_stride = p->page_size * row;
  p->kpe_slot_stride = combined ? row : kMlaRopeDim;
  p->kpe_page_stride = combined ? p->page_size * row : p->page_size * kMlaRopeDim;
  p->q_nope = q_nope.untyped_data();
  p->q_pe = q_pe.untyped_data();
  p->ckv = ckv.untyped_data();
  // Combined layout: the rope part starts 512 elements into each row of the one buffer.
  p->kpe = combined && !p->ds_rows
               ? static_cast<const char*>(ckv.untyped_data()) + kMlaLatentDim * ffi::ByteWidth(cache_dt)
               : (p->ds_rows ? ckv.untyped_data() : kpe.untyped_data());
  p->out = out->untyped_data();
  p->lse = lse->typed_data();
  p->scale = scale;
  p->kv_scale = kv_scale;
  p->fp8 = fp8_cache;
  p->kv_e5m2 = cache_dt == ffi::DataType::F8E5M2;
  p->kpe_fp8 = fp8_cache && combined;
  p->q_bf16 = dt == ffi::DataType::BF16;
  if (ds_read < 0 || ds_read > 2) {
    return ffi::Error::InvalidArgument("jaxpaged: ds_read must be 0 (float32), 1 (bfloat16) or 2 (float16)");
  }
  p->set_ds_read(ds_read);
  if (p->ds_bf16 && !(p->ds_rows && dt != ffi::DataType::F16)) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: bf16 dequantization (ds_read 1) applies to 656-byte rows with bfloat16 or float32 queries");
  }
  if (p->ds_f16 && !p->ds_rows) {
    return ffi::Error::InvalidArgument("jaxpaged: f16 dequantization (ds_read 2) applies to 656-byte rows");
  }
  return decode_options(options, kMlaOptionWords, &p->options);
}

// The fp8_math attribute (dense and sparse calls), after the caches are decoded.
inline ffi::Error decode_mla_fp8_math(int32_t fp8_math, MlaDecodeParams* p) {
  p->fp8_math = fp8_math != 0;
  if (p->fp8_math && !p->fp8 && !p->ds_rows) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: fp8_math applies to fp8 caches (float8_e4m3fn / float8_e5m2, or 656-byte rows)");
  }
  return ffi::Error::Success();
}

inline ffi::Error decode_mla_decode(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv,
                                    ffi::AnyBuffer kpe, ffi::Buffer<ffi::S32> kv_lens,
                                    ffi::Buffer<ffi::S32> block_tables, ffi::Buffer<ffi::S32> options,
                                    float scale, float kv_scale, int32_t ds_read, int32_t fp8_math,
                                    int32_t causal, ffi::Result<ffi::AnyBuffer>& out,
                                    ffi::Result<ffi::Buffer<ffi::F32>>& lse, MlaDecodeParams* p) {
  JP_RETURN_IF_ERROR(decode_mla_queries_and_caches(q_nope, q_pe, ckv, kpe, options, scale, kv_scale, ds_read, out, lse, p));
  JP_RETURN_IF_ERROR(decode_mla_fp8_math(fp8_math, p));
  JP_RETURN_IF_ERROR(check_rank(kv_lens.dimensions(), 1, "kv_lens"));
  JP_RETURN_IF_ERROR(check_rank(block_tables.dimensions(), 2, "block_tables"));
  JP_RETURN_IF_ERROR(check_dim(kv_lens.dimensions()[0], p->batch, "kv_lens length"));
  JP_RETURN_IF_ERROR(check_dim(block_tables.dimensions()[0], p->batch, "block_tables rows"));
  p->max_pages = block_tables.dimensions()[1];
  p->kv_lens = kv_lens.typed_data();
  p->block_tables = block_tables.typed_data();
  p->causal = causal != 0;
  return ffi::Error::Success();
}

}  // namespace jaxpaged
