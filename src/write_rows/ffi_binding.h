// The FFI signature of the row scatter and its decoding (CPU and GPU handlers share both).
#pragma once

#include "common/ffi_helpers.h"
#include "common/host_device.h"
#include "write_rows/params.h"

namespace jaxpaged {

// Operands: k caches, then k rows, then the slots (k = 1 or 2, the number of results). Each
// cache is [pages, page_size, heads, width] (layout 0) or [pages, heads, page_size, width] (layout
// 1), its rows [N, heads, width] of its dtype; or, layout 0 only, [pages, page_size, width] (MLA's
// caches: one head) with rows [N, width]. Result i is cache i updated (aliased to it).
inline auto write_rows_binding() {
  return ffi::Ffi::Bind()
      .RemainingArgs()                // caches, rows, slots
      .Attr<int32_t>("layout")
      .RemainingRets();               // the caches, updated
}

// Decodes the call into one WriteRowsParams per cache (p[0 .. *count - 1]).
inline ffi::Error decode_write_rows(ffi::RemainingArgs args, int32_t layout, ffi::RemainingRets rets,
                                    WriteRowsParams* p, int* count) {
  const int64_t k = int64_t(rets.size());
  if (k < 1 || k > kWriteRowsMaxCaches || int64_t(args.size()) != 2 * k + 1) {
    return ffi::Error::InvalidArgument("jaxpaged: write_rows takes 1 or 2 caches, as many rows and the slots");
  }
  if (layout != 0 && layout != 1) return ffi::Error::InvalidArgument("jaxpaged: write_rows layout must be 0 or 1");
  auto slots = args.get<ffi::Buffer<ffi::S32>>(size_t(2 * k));
  if (slots.has_error()) return ffi::Error::InvalidArgument("jaxpaged: write_rows needs int32 slots");
  JP_RETURN_IF_ERROR(check_rank(slots->dimensions(), 1, "slots"));
  for (int64_t i = 0; i < k; ++i) {
    auto cache = args.get<ffi::AnyBuffer>(size_t(i));
    auto rows = args.get<ffi::AnyBuffer>(size_t(k + i));
    auto out = rets.get<ffi::AnyBuffer>(size_t(i));
    if (cache.has_error() || rows.has_error() || out.has_error()) {
      return ffi::Error::InvalidArgument("jaxpaged: write_rows' operands and results must be buffers");
    }
    // (a rank-3 cache is one head: [pages, page_size, width], rows [N, width]; layout 0 only)
    const bool one_head = cache->dimensions().size() == 3 && layout == 0;
    JP_RETURN_IF_ERROR(check_rank(cache->dimensions(), one_head ? 3 : 4, "cache"));
    JP_RETURN_IF_ERROR(check_rank(rows->dimensions(), one_head ? 2 : 3, "rows"));
    const ffi::AnyBuffer& result = **out;
    if (rows->element_type() != cache->element_type() || result.element_type() != cache->element_type()) {
      return ffi::Error::InvalidArgument("jaxpaged: write_rows needs rows in the cache's dtype");
    }
    const auto cd = cache->dimensions(), rd = rows->dimensions(), od = result.dimensions();
    bool same = od.size() == cd.size();
    for (size_t d = 0; same && d < cd.size(); ++d) same = od[d] == cd[d];
    if (!same) return ffi::Error::InvalidArgument("jaxpaged: write_rows' results must have their caches' shapes");
    const int64_t elt = int64_t(ffi::ByteWidth(cache->element_type()));
    WriteRowsParams& q = p[i];
    q.num_pages = cd[0];
    q.page_size = layout == 0 ? cd[1] : cd[2];
    q.heads = one_head ? 1 : (layout == 0 ? cd[2] : cd[1]);
    const int64_t width = cd[cd.size() - 1];
    q.num_rows = rd[0];
    if (!one_head) JP_RETURN_IF_ERROR(check_dim(rd[1], q.heads, "rows' heads"));
    JP_RETURN_IF_ERROR(check_dim(rd[rd.size() - 1], width, "rows' width"));
    JP_RETURN_IF_ERROR(check_dim(slots->dimensions()[0], q.num_rows, "slots length"));
    q.row_bytes = width * elt;
    if (q.row_bytes % 16 != 0) return ffi::Error::InvalidArgument("jaxpaged: write_rows needs rows of 16k bytes");
    q.head_stride = layout == 0 ? q.row_bytes : q.page_size * q.row_bytes;
    q.slot_stride = layout == 0 ? q.heads * q.row_bytes : q.row_bytes;
    q.page_stride = q.page_size * q.heads * q.row_bytes;
    q.cache = result.untyped_data();
    q.source = cache->untyped_data();
    q.cache_bytes = q.num_pages * q.page_stride;
    q.rows = rows->untyped_data();
    q.slots = slots->typed_data();
  }
  *count = int(k);
  return ffi::Error::Success();
}

// The byte offset of (slot, head) in the cache, or -1 for a slot that is skipped.
JP_HOST_DEVICE int64_t write_rows_offset(const WriteRowsParams& p, int64_t slot, int64_t head) {
  if (slot < 0 || slot >= p.num_pages * p.page_size) return -1;
  return (slot / p.page_size) * p.page_stride + (slot % p.page_size) * p.slot_stride + head * p.head_stride;
}

}  // namespace jaxpaged
