// fp8 cache values (OCP float8_e4m3fn / float8_e5m2, jaxpaged/_fp8.py) as the kernels' 16-bit
// floats. Exact: every e4m3 and e5m2 value, NaN and e5m2's infinities included, is a half and a
// bf16 value, so a dequantized cache differs from the reference only by where the scale applies
// (the kernels fold k_scale into the score scale and v_scale into the output).
#pragma once

#include <cstdint>

#include "common/gpu_math.cuh"
#include "gpu_vendor.h"
#if !defined(JAXPAGED_VENDOR_HIP)
#include <cuda_fp8.h>
#endif

namespace jaxpaged {

#if defined(JAXPAGED_VENDOR_HIP) || defined(JAXPAGED_PORTABLE_FP8)
// One fp8 byte as half bits, by bit operations (the portable path).
__device__ __forceinline__ uint32_t fp8_to_half_bits(uint32_t b, bool e5m2) {
  if (e5m2) return b << 8;  // e5m2 is the top byte of a half
  const uint32_t sign = (b & 0x80u) << 8, em = b & 0x7Fu;
  if (em == 0x7Fu) return sign | 0x7E00u;                // NaN
  if (em >= 8u) return sign | ((em + (8u << 3)) << 7);   // normal: exponent bias 7 -> 15
  if (em == 0u) return sign;                             // zero
  const uint32_t lead = em >= 4u ? 2u : (em >= 2u ? 1u : 0u);  // subnormal em * 2^-9
  return sign | ((lead + 6u) << 10) | ((em << (10u - lead)) & 0x3FFu);
}
#endif

// bf16 queries on float16 tensor cores (the products over fp8 caches): each query row is rewritten
// once as float16 times 2^k, k putting the row's largest |q| in [2^14, 2^15), so every bf16 value
// of the row down to 2^-32 of that largest is exact in float16 (smaller ones round at 2^-40 of
// it); the row's scores then come out 2^k too large and its score multiplier takes 2^-k. The k of
// a row whose largest |q| (nonzero and finite: the callers keep k = 0 otherwise, each by its own
// rule for inf and NaN) has the biased float32 / bf16 exponent `biased` (0: a subnormal). Used by
// the paged tile kernel's register path, the MLA wgmma kernel's convert_queries and the wide fp8
// kernel.
__device__ __forceinline__ int f16_query_exponent(int biased) { return min(14 - (biased - 127), 126); }
// fp8 (e4m3) queries: the k of 2^k putting a row's largest |value| `mx` in (224, 448] (the
// largest e4m3 is 448), so the row's largest value keeps e4m3's full precision; a zero or
// non-finite row keeps k = 0. Used by the narrow fp8 MLA kernel and the wide one's fp8-math mode.
__device__ __forceinline__ int e4m3_query_exponent(float mx) {
  int k = 0;
  if (mx > 0.f && mx != INFINITY) {
    const int e = int((__float_as_uint(mx) >> 23) & 0xFFu) - 127;  // (-127: a subnormal)
    k = min(8 - e, 126);
    if (k > -126 && ldexpf(mx, k) > 448.f) k -= 1;
  }
  return k;
}
// 2^k as a float, for k in [-126, 127].
__device__ __forceinline__ float exp2_of(int k) { return __uint_as_float(uint32_t(127 + k) << 23); }

// Two fp8 values (low byte first) as a half2's bits (low half first).
__device__ __forceinline__ uint32_t fp8x2_to_half2_bits(uint32_t two, bool e5m2) {
#if defined(JAXPAGED_VENDOR_HIP) || defined(JAXPAGED_PORTABLE_FP8)
  return fp8_to_half_bits(two & 0xFFu, e5m2) | (fp8_to_half_bits((two >> 8) & 0xFFu, e5m2) << 16);
#else
  const __nv_fp8x2_storage_t s = static_cast<__nv_fp8x2_storage_t>(two & 0xFFFFu);
  const __half2_raw h = e5m2 ? __nv_cvt_fp8x2_to_halfraw2(s, __NV_E5M2) : __nv_cvt_fp8x2_to_halfraw2(s, __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
#endif
}

// Four fp8 values (a word, low byte first) as two half2s' bits: bytes 0-1 in `lo`, 2-3 in `hi`.
// Where the conversion is an instruction (sm_89 and later) the word's halves are split by a
// `mov.b32 {l, h}`, which F2FP reads in place (its .H1 operand): no shift for the high pair and no
// mask for the low one, as fp8x2_to_half2_bits on `w & 0xFFFF` and `w >> 16` costs. Used by the
// paged tile kernel (register path and converted stages) and the wide fp8 MLA kernel.
template <bool kE5m2>
__device__ __forceinline__ void fp8x4_to_half2x2_bits(uint32_t w, uint32_t& lo, uint32_t& hi) {
#if !defined(JAXPAGED_VENDOR_HIP) && !defined(JAXPAGED_PORTABLE_FP8) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if constexpr (kE5m2) {
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e5m2x2 %0, l;\ncvt.rn.f16x2.e5m2x2 %1, h;\n}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
  } else {
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
  }
#else
  lo = fp8x2_to_half2_bits(w & 0xFFFFu, kE5m2);
  hi = fp8x2_to_half2_bits(w >> 16, kE5m2);
#endif
}

// A half2's bits as a pair of T (the tensor-core operand register of two values).
template <typename T>
__device__ __forceinline__ uint32_t half2_bits_as(uint32_t h);
template <>
__device__ __forceinline__ uint32_t half2_bits_as<gpu_half>(uint32_t h) {
  return h;
}
template <>
__device__ __forceinline__ uint32_t half2_bits_as<gpu_bf16>(uint32_t h) {
  __half2 v;
  *reinterpret_cast<uint32_t*>(&v) = h;
  const float2 f = __half22float2(v);
  return pack2<gpu_bf16>(f.x, f.y);  // exact: the values are fp8 values
}

// Sixteen fp8 values (one 16-byte chunk) as sixteen T values: two 16-byte chunks of T. The format:
// kFmt 0 (e4m3) or 1 (e5m2) at compile time, each word through fp8x4_to_half2x2_bits; or kFmt -1,
// `e5m2` at run time, each pair masked or shifted out (the MLA gathering loader's: the in-place
// split made its loader warpgroup spill more).
template <typename T, int kFmt = -1>
__device__ __forceinline__ void fp8x16_to(const uint4& in, uint4& lo, uint4& hi, bool e5m2) {
  const uint32_t w[4] = {in.x, in.y, in.z, in.w};
  uint32_t o[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kFmt >= 0) {
      uint32_t a, b;
      fp8x4_to_half2x2_bits<kFmt == 1>(w[i], a, b);
      o[2 * i] = half2_bits_as<T>(a);
      o[2 * i + 1] = half2_bits_as<T>(b);
    } else {
      o[2 * i] = half2_bits_as<T>(fp8x2_to_half2_bits(w[i] & 0xFFFFu, e5m2));
      o[2 * i + 1] = half2_bits_as<T>(fp8x2_to_half2_bits(w[i] >> 16, e5m2));
    }
  }
  lo = make_uint4(o[0], o[1], o[2], o[3]);
  hi = make_uint4(o[4], o[5], o[6], o[7]);
}

// Two fp8 values as an f16x2 (exact) times a scale each, each product rounded to T: how 656-byte
// rows read with bf16 dequantization are rounded (the reference's float32 product, then T).
template <typename T>
__device__ __forceinline__ uint32_t half2_bits_scaled_to(uint32_t h2, float s_lo, float s_hi) {
  __half2 h;
  *reinterpret_cast<uint32_t*>(&h) = h2;
  const float2 f = __half22float2(h);
  return pack2<T>(f.x * s_lo, f.y * s_hi);
}

// Two f16 values times two f16 factors, each product rounded to the nearest f16 (subnormals kept,
// past 65504 infinite): the float16 reading of 656-byte rows (ds_dequant="float16"), f16(value x
// f16(scale)), one multiply a pair.
__device__ __forceinline__ uint32_t f16x2_mul(uint32_t a, uint32_t b) {
#if defined(JAXPAGED_VENDOR_HIP) || defined(JAXPAGED_PORTABLE_FP8)
  // (the float32 product of two f16 values is exact, so one rounding to f16 gives the same bits)
  __half2 x, y;
  *reinterpret_cast<uint32_t*>(&x) = a;
  *reinterpret_cast<uint32_t*>(&y) = b;
  const float2 fx = __half22float2(x), fy = __half22float2(y);
  return pack2<gpu_half>(fx.x * fy.x, fx.y * fy.y);
#else
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#endif
}

// Eight e4m3 values read as ds_dequant="float16" does: each f16(value x f16(scale)), as f16 bits.
__device__ __forceinline__ uint4 fp8x8_f16_scaled(const uint2& in, float scale) {
  const uint32_t s2 = pack2<gpu_half>(scale, scale);
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t two = ((i < 2 ? in.x : in.y) >> (16 * (i % 2))) & 0xFFFFu;
    o[i] = f16x2_mul(fp8x2_to_half2_bits(two, false), s2);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// Sixteen e4m3 values times `scale`, rounded to T (the Hopper MLA kernel's 656-byte rows, whose
// per-token group scales cannot be applied after its products).
template <typename T>
__device__ __forceinline__ void fp8x16_scaled_to(const uint4& in, float scale, uint4& lo, uint4& hi) {
  const uint32_t w[4] = {in.x, in.y, in.z, in.w};
  uint32_t o[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    o[i] = half2_bits_scaled_to<T>(fp8x2_to_half2_bits((w[i / 2] >> (16 * (i % 2))) & 0xFFFFu, false), scale, scale);
  }
  lo = make_uint4(o[0], o[1], o[2], o[3]);
  hi = make_uint4(o[4], o[5], o[6], o[7]);
}

// Eight fp8 values (one 8-byte load) as eight T values (one 16-byte chunk).
template <typename T>
__device__ __forceinline__ uint4 fp8x8_to(const uint2& in, bool e5m2) {
  return make_uint4(half2_bits_as<T>(fp8x2_to_half2_bits(in.x & 0xFFFFu, e5m2)),
                    half2_bits_as<T>(fp8x2_to_half2_bits(in.x >> 16, e5m2)),
                    half2_bits_as<T>(fp8x2_to_half2_bits(in.y & 0xFFFFu, e5m2)),
                    half2_bits_as<T>(fp8x2_to_half2_bits(in.y >> 16, e5m2)));
}

// Eight e4m3 values times `scale`, each product rounded to T (656-byte rows read with bf16
// dequantization; the same rounding as fp8x16_scaled_to).
template <typename T>
__device__ __forceinline__ uint4 fp8x8_scaled_to(const uint2& in, float scale) {
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t two = ((i < 2 ? in.x : in.y) >> (16 * (i % 2))) & 0xFFFFu;
    o[i] = half2_bits_scaled_to<T>(fp8x2_to_half2_bits(two, false), scale, scale);
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// Eight fp8 values (one 8-byte load) as floats.
__device__ __forceinline__ void fp8x8_to_float(const uint2& in, bool e5m2, float out[8]) {
  const uint32_t w[2] = {in.x, in.y};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 h;
    *reinterpret_cast<uint32_t*>(&h) = fp8x2_to_half2_bits((w[i / 2] >> (16 * (i % 2))) & 0xFFFFu, e5m2);
    const float2 f = __half22float2(h);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

}  // namespace jaxpaged
