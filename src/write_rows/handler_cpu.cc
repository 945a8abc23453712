// CPU handler of the row scatter: one memcpy per (row, head).
#include <cstring>

#include "write_rows/ffi_binding.h"

namespace jaxpaged {
namespace {

ffi::Error write_rows_cpu_impl(ffi::RemainingArgs args, int32_t layout, ffi::RemainingRets rets) {
  WriteRowsParams params[kWriteRowsMaxCaches];
  int count = 0;
  JP_RETURN_IF_ERROR(decode_write_rows(args, layout, rets, params, &count));
  for (int i = 0; i < count; ++i) {
    const WriteRowsParams& p = params[i];
    auto* dst = static_cast<char*>(p.cache);
    if (p.source != p.cache) std::memcpy(dst, p.source, size_t(p.cache_bytes));  // (result not aliased)
    const auto* src = static_cast<const char*>(p.rows);
    for (int64_t n = 0; n < p.num_rows; ++n) {
      for (int64_t h = 0; h < p.heads; ++h) {
        const int64_t at = write_rows_offset(p, p.slots[n], h);
        if (at >= 0) std::memcpy(dst + at, src + (n * p.heads + h) * p.row_bytes, size_t(p.row_bytes));
      }
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_write_rows_cpu, write_rows_cpu_impl, write_rows_binding());

}  // namespace jaxpaged
