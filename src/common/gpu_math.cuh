// Device helpers shared by the kernels: 16-bit float conversion, 16-byte vector loads, a fast
// exp2, and the online-softmax state that partial results merge through.
#pragma once

#include <cstdint>

#include "gpu_vendor.h"

namespace jaxpaged {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float fast_exp2(float x) {
#if defined(__HIPCC__)
  return exp2f(x);
#else
  float y;  // ex2.approx: 2 ulp, and exp2(-inf) = 0, which masking relies on
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

// tanh from one exp2 and one fast division: absolute error about 1e-7, where tanhf costs some 20
// instructions (a soft cap applies it to every score). |x| is clamped at 15, where tanh is 1 in float.
__device__ __forceinline__ float fast_tanh(float x) {
  x = fminf(fmaxf(x, -15.f), 15.f);
  return 1.f - __fdividef(2.f, fast_exp2(x * (2.f * kLog2e)) + 1.f);
}

__device__ __forceinline__ float to_float(gpu_half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(gpu_bf16 x) { return gpu::bf16_to_float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ gpu_half from_float<gpu_half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ gpu_bf16 from_float<gpu_bf16>(float x) { return gpu::float_to_bf16(x); }

// Two floats as one 32-bit pair of 16-bit floats (lo in the low half): a tensor-core operand register.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<gpu_bf16>(float lo, float hi) {
  const gpu_bf16x2 v = gpu::floats_to_bf16x2(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<gpu_half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Eight 16-bit floats as one 16-byte load.
struct Vec8 {
  uint4 raw;
};

template <typename T>
__device__ __forceinline__ Vec8 load_vec8(const T* p) {
  Vec8 v;
  v.raw = *reinterpret_cast<const uint4*>(p);
  return v;
}

// Two bf16 values packed in a word (low half first) as floats: exact, a shift and a mask.
__device__ __forceinline__ float2 bf16x2_to_float2(uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xFFFF0000u));
}

template <typename T>
__device__ __forceinline__ void vec8_to_float(const Vec8& v, float out[8]) {
  const T* e = reinterpret_cast<const T*>(&v.raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = to_float(e[i]);
}

// Specialised: bf16 -> f32 is a shift, cheaper than the generic conversion.
template <>
__device__ __forceinline__ void vec8_to_float<gpu_bf16>(const Vec8& v, float out[8]) {
  const uint32_t w[4] = {v.raw.x, v.raw.y, v.raw.z, v.raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = bf16x2_to_float2(w[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// Rescale factor exp2(old_max - new_max), with an empty state (max = -inf) mapping to 0.
__device__ __forceinline__ float rescale(float old_max, float new_max) {
  return old_max == -INFINITY ? 0.f : fast_exp2(old_max - new_max);
}

}  // namespace jaxpaged
