// Rows written into cache slots: the one operation behind write_kv and write_mla_kv. jaxpaged has
// already cast, quantized or packed the new values into the cache's own element type, so a row is
// only bytes here: row n of head h goes to slot slots[n] = page * page_size + offset. One call
// writes one or two caches (write_kv's K and V: one launch) with the same slots.
#pragma once

#include <cstdint>

namespace jaxpaged {

constexpr int kWriteRowsMaxCaches = 2;

struct WriteRowsParams {
  void* cache;             // the result: the cache updated in place (it aliases the cache operand)
  const void* source;      // the cache operand: the same buffer, unless XLA gave the result its
                           // own (then the handler first copies source into cache: cache_bytes)
  int64_t cache_bytes;
  const void* rows;        // [num_rows, heads, row_bytes]
  const int32_t* slots;    // [num_rows]; a slot outside [0, num_pages * page_size) is skipped
  int64_t num_rows, heads, row_bytes;  // row_bytes: a multiple of 16
  int64_t num_pages, page_size;
  int64_t page_stride, slot_stride, head_stride;  // in bytes
};

}  // namespace jaxpaged
