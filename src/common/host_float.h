// Conversions between float and the 16-bit float formats on the host (CPU handlers).
// Written out by bit manipulation so the CPU build needs no compiler extension types.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace jaxpaged {

inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// bfloat16 is the top half of a float32.
inline float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t bits = float_to_bits(f);
  if (std::isnan(f)) return uint16_t((bits >> 16) | 0x40);  // keep it a (quiet) NaN
  bits += 0x7FFF + ((bits >> 16) & 1);                       // round to nearest even
  return uint16_t(bits >> 16);
}

// IEEE binary16.
inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t man = h & 0x3FF;
  if (exp == 0x1F) return bits_to_float(sign | 0x7F800000 | (man << 13));  // inf / NaN
  if (exp == 0) {                                                         // zero / subnormal
    const float mag = std::ldexp(float(man), -24);
    return sign ? -mag : mag;
  }
  return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t float_to_f16(float f) {
  const uint32_t bits = float_to_bits(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  const float a = std::fabs(f);
  if (std::isnan(f)) return uint16_t(sign | 0x7E00);
  if (a >= 65520.0f) return uint16_t(sign | 0x7C00);  // rounds to infinity
  if (a < 6.103515625e-05f) {                          // subnormal range: multiples of 2^-24
    return uint16_t(sign | uint16_t(std::nearbyint(a * 16777216.0f)));
  }
  // Normal: round the 23-bit mantissa to 10 bits, nearest even; a carry bumps the exponent.
  uint32_t abits = float_to_bits(a);
  abits += 0xFFF + ((abits >> 13) & 1);
  const uint32_t exp = (abits >> 23) - 112;
  return uint16_t(sign | (exp << 10) | ((abits >> 13) & 0x3FF));
}

// float8_e4m3fn: bias 7, no infinities; S.1111.111 is NaN, exponent 0 is subnormal (m * 2^-9).
inline float e4m3_to_float(uint8_t b) {
  const float sign = (b & 0x80) ? -1.f : 1.f;
  const int exp = (b >> 3) & 0xF, man = b & 0x7;
  if (exp == 0xF && man == 0x7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(float(man), -9);
  return sign * std::ldexp(float(8 + man), exp - 10);
}

// float8_e5m2 is the top byte of an IEEE binary16.
inline float e5m2_to_float(uint8_t b) { return f16_to_float(uint16_t(uint16_t(b) << 8)); }

// Element access by runtime dtype tag, used by the CPU handlers (fp8: caches only, read-only).
enum class Dtype { kF32, kF16, kBF16, kF8E4M3, kF8E5M2 };

inline bool is_fp8(Dtype t) { return t == Dtype::kF8E4M3 || t == Dtype::kF8E5M2; }

inline float load_float(const void* base, int64_t i, Dtype t) {
  switch (t) {
    case Dtype::kF32: return static_cast<const float*>(base)[i];
    case Dtype::kF16: return f16_to_float(static_cast<const uint16_t*>(base)[i]);
    case Dtype::kF8E4M3: return e4m3_to_float(static_cast<const uint8_t*>(base)[i]);
    case Dtype::kF8E5M2: return e5m2_to_float(static_cast<const uint8_t*>(base)[i]);
    default: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
  }
}

inline void store_float(void* base, int64_t i, float v, Dtype t) {
  switch (t) {
    case Dtype::kF32: static_cast<float*>(base)[i] = v; break;
    case Dtype::kF16: static_cast<uint16_t*>(base)[i] = float_to_f16(v); break;
    default: static_cast<uint16_t*>(base)[i] = float_to_bf16(v); break;
  }
}

}  // namespace jaxpaged
