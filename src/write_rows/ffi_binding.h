// The FFI signature of the row scatter and its decoding (CPU and GPU handlers share both).
#pragma once

#include "common/ffi_helpers.h"
#include "common/host_device.h"
#include "write_rows/params.h"

namespace jaxpaged {

// The cache is [pages, page_size, heads, width] (layout 0) or [pages, heads, page_size, width]
// (layout 1); rows are [N, heads, width] of the cache's dtype; the result is the cache (aliased).
inline auto write_rows_binding() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()          // cache
      .Arg<ffi::AnyBuffer>()          // rows
      .Arg<ffi::Buffer<ffi::S32>>()   // slots
      .Attr<int32_t>("layout")
      .Ret<ffi::AnyBuffer>();         // the cache, updated
}

inline ffi::Error decode_write_rows(ffi::AnyBuffer cache, ffi::AnyBuffer rows, ffi::Buffer<ffi::S32> slots,
                                    int32_t layout, ffi::Result<ffi::AnyBuffer>& out, WriteRowsParams* p) {
  JP_RETURN_IF_ERROR(check_rank(cache.dimensions(), 4, "cache"));
  JP_RETURN_IF_ERROR(check_rank(rows.dimensions(), 3, "rows"));
  JP_RETURN_IF_ERROR(check_rank(slots.dimensions(), 1, "slots"));
  if (rows.element_type() != cache.element_type() || out->element_type() != cache.element_type()) {
    return ffi::Error::InvalidArgument("jaxpaged: write_rows needs rows in the cache's dtype");
  }
  if (layout != 0 && layout != 1) return ffi::Error::InvalidArgument("jaxpaged: write_rows layout must be 0 or 1");
  if (out->untyped_data() != cache.untyped_data()) {
    return ffi::Error::InvalidArgument("jaxpaged: write_rows' result must alias its cache operand");
  }
  const auto cd = cache.dimensions(), rd = rows.dimensions();
  const int64_t elt = int64_t(ffi::ByteWidth(cache.element_type()));
  p->num_pages = cd[0];
  p->page_size = layout == 0 ? cd[1] : cd[2];
  p->heads = layout == 0 ? cd[2] : cd[1];
  const int64_t width = cd[3];
  p->num_rows = rd[0];
  JP_RETURN_IF_ERROR(check_dim(rd[1], p->heads, "rows' heads"));
  JP_RETURN_IF_ERROR(check_dim(rd[2], width, "rows' width"));
  JP_RETURN_IF_ERROR(check_dim(slots.dimensions()[0], p->num_rows, "slots length"));
  p->row_bytes = width * elt;
  if (p->row_bytes % 16 != 0) return ffi::Error::InvalidArgument("jaxpaged: write_rows needs rows of 16k bytes");
  p->head_stride = layout == 0 ? p->row_bytes : p->page_size * p->row_bytes;
  p->slot_stride = layout == 0 ? p->heads * p->row_bytes : p->row_bytes;
  p->page_stride = p->page_size * p->heads * p->row_bytes;
  p->cache = out->untyped_data();
  p->rows = rows.untyped_data();
  p->slots = slots.typed_data();
  return ffi::Error::Success();
}

// The byte offset of (slot, head) in the cache, or -1 for a slot that is skipped.
JP_HOST_DEVICE int64_t write_rows_offset(const WriteRowsParams& p, int64_t slot, int64_t head) {
  if (slot < 0 || slot >= p.num_pages * p.page_size) return -1;
  return (slot / p.page_size) * p.page_stride + (slot % p.page_size) * p.slot_stride + head * p.head_stride;
}

}  // namespace jaxpaged
