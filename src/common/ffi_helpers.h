// Small helpers shared by the FFI handlers: dtype tags and argument checks that return ffi::Error.
// The Python shape rules already reject bad input with ValueError; these checks guard the C ABI
// against direct callers, so a mismatch fails cleanly instead of reading out of bounds.
#pragma once

#include <cstdint>
#include <string>

#include "common/host_float.h"
#include "xla/ffi/api/ffi.h"

namespace jaxpaged {

namespace ffi = xla::ffi;

inline bool to_dtype(ffi::DataType t, Dtype* out) {
  switch (t) {
    case ffi::DataType::F32: *out = Dtype::kF32; return true;
    case ffi::DataType::F16: *out = Dtype::kF16; return true;
    case ffi::DataType::BF16: *out = Dtype::kBF16; return true;
    default: return false;
  }
}

// A KV cache's dtype: q's 16/32-bit floats or an fp8 format (read as value * scale).
inline bool to_cache_dtype(ffi::DataType t, Dtype* out) {
  switch (t) {
    case ffi::DataType::F8E4M3FN: *out = Dtype::kF8E4M3; return true;
    case ffi::DataType::F8E5M2: *out = Dtype::kF8E5M2; return true;
    default: return to_dtype(t, out);
  }
}

inline std::string dims_to_string(ffi::AnyBuffer::Dimensions d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Checks that `d` has the expected rank; `what` names the argument in the error.
inline ffi::Error check_rank(ffi::AnyBuffer::Dimensions d, size_t rank, const char* what) {
  if (d.size() == rank) return ffi::Error::Success();
  return ffi::Error::InvalidArgument(std::string("jaxpaged: ") + what + " must have rank " +
                                     std::to_string(rank) + ", got shape " + dims_to_string(d));
}

inline ffi::Error check_dim(int64_t got, int64_t want, const char* what) {
  if (got == want) return ffi::Error::Success();
  return ffi::Error::InvalidArgument(std::string("jaxpaged: ") + what + " is " +
                                     std::to_string(got) + ", expected " + std::to_string(want));
}

// Traced options travel as an int32 operand of `words` words; static ones as attributes, with an
// empty operand. *out is the operand's data (device memory on GPU), or nullptr when it is empty.
inline ffi::Error decode_options(ffi::Buffer<ffi::S32> options, int64_t words, const int32_t** out) {
  const int64_t n = int64_t(options.element_count());
  if (n != 0 && n != words) {
    return ffi::Error::InvalidArgument("jaxpaged: the options operand must have 0 or " +
                                       std::to_string(words) + " int32 words, got " + std::to_string(n));
  }
  *out = n == 0 ? nullptr : options.typed_data();
  return ffi::Error::Success();
}

#define JP_RETURN_IF_ERROR(expr)              \
  do {                                        \
    ::xla::ffi::Error jp_err_ = (expr);       \
    if (jp_err_.failure()) return jp_err_;    \
  } while (0)

}  // namespace jaxpaged
