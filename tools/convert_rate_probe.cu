// How fast can a Hopper SM sub-partition (SMSP) turn e4m3 values into bf16(value x scale), the
// 656-byte rows' reading rule, against the number of warps doing it? (NOTES item 66: session 42's
// dequantizing loader spent ~3,600 cycles a tile converting on one warp per SMSP; the reading was
// that the F2FP conversions' pipe bounds it.) Standalone; seconds of device time.
//
// One block per SM, W warps (W / 4 per SMSP), each thread converting chunks of 16 e4m3 values held
// in registers (moved a little each step so nothing folds) and XOR-ing the results into a register
// that is stored at the end. Modes:
//   exact   : the v1 loader's conversion (bench/experiments/2026-11-27_ds_dequant_loader_v1.patch,
//             ds_dq_chunk): cvt e4m3x2 -> f16x2, f16 -> f32, x scale, cvt -> bf16x2 (F2FP twice a pair)
//   unpack  : cvt e4m3x2 -> f16x2 only (the first F2FP)
//   pack    : f32 x scale, cvt -> bf16x2 only (the second F2FP), from integer-made floats
//   alu     : e4m3 -> f32 by shift and mask (x 2^120 folded into the scale), then the pack
//             (not the reference's rule for NaN bytes; rate only)
//   int16   : e4m3 -> f16x2 by shift and mask (each value / 2^8: an f16 exactly, subnormals
//             included; the 2^8 folded into the scale), f16 -> f32, x scale, cvt -> bf16x2, and a
//             per-chunk test for NaN bytes (0x7F / 0xFF decode to 1.875 / 2^8, not NaN: a kernel
//             would take the exact path for such a chunk; here the test's bit is only kept) - the
//             unpack's work moved from the conversion pipe to the integer one
// Printed: cycles per chunk per warp and values per cycle per SMSP, per mode and W.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/convert_rate_probe \
//     tools/convert_rate_probe.cu && /tmp/convert_rate_probe
// Written in session 42 (compiled for sm_90a here), not yet run on a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

constexpr int kChunks = 4096;  // chunks a thread converts (16 values each)

__device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;\n" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}
__device__ __forceinline__ void e4m3x4_to_f16x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
}
__device__ __forceinline__ float h2f(uint32_t h2, int i) {
  __half2 h;
  *reinterpret_cast<uint32_t*>(&h) = h2;
  const float2 f = __half22float2(h);
  return i ? f.y : f.x;
}
// e4m3 byte j of w as the float32 with its bits (sign, then the 7 bits at 26..20): the value / 2^120.
__device__ __forceinline__ float e4m3_scaled_down(uint32_t w, int j) {
  const int32_t top = int32_t(w << (24 - 8 * j));
  return __int_as_float((top >> 4) & int32_t(0x87F00000u));
}

// Bytes 0 and 2 (odd = 1: bytes 1 and 3) of w as the f16x2 of value / 2^8: sign to bit 15 (31), the
// other seven bits to 13..7 (29..23).
__device__ __forceinline__ uint32_t e4m3_pair_f16_down(uint32_t w, int odd) {
  const uint32_t a = odd ? w >> 1 : w << 7, b = odd ? w : w << 8;
  return (a & 0x3F803F80u) | (b & 0x80008000u);
}

template <int kMode>
__global__ void __launch_bounds__(384, 1) convert_rate(const uint4* seed, float scale, uint32_t* out, long long* cycles) {
  uint4 v = seed[threadIdx.x % 64];
  uint32_t acc = 0;
  const float s120 = scale * 0x1p120f;
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 2
  for (int i = 0; i < kChunks; ++i) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t o[8];
    if constexpr (kMode == 0) {  // exact
      float f[16];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t lo, hi;
        e4m3x4_to_f16x2(w[q], lo, hi);
        f[4 * q] = h2f(lo, 0) * scale;
        f[4 * q + 1] = h2f(lo, 1) * scale;
        f[4 * q + 2] = h2f(hi, 0) * scale;
        f[4 * q + 3] = h2f(hi, 1) * scale;
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) o[q] = bf16x2(f[4 * q], f[4 * q + 2]), o[4 + q] = bf16x2(f[4 * q + 1], f[4 * q + 3]);
    } else if constexpr (kMode == 1) {  // unpack
#pragma unroll
      for (int q = 0; q < 4; ++q) e4m3x4_to_f16x2(w[q], o[2 * q], o[2 * q + 1]);
    } else if constexpr (kMode == 2) {  // pack
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const uint32_t x = w[q / 2] >> (q % 2);
        o[q] = bf16x2(__int_as_float(x & 0x3FFFFFFF) * scale, __int_as_float((x >> 2) & 0x3FFFFFFF) * scale);
      }
    } else if constexpr (kMode == 4) {  // int16
      const float s8 = scale * 256.f;
      uint32_t nan_bytes = 0;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint32_t ev = e4m3_pair_f16_down(w[q], 0), od = e4m3_pair_f16_down(w[q], 1);
        // (f16 pairs: (byte 0, byte 2) and (byte 1, byte 3) - dims 4q, 4q + 2 and 4q + 1, 4q + 3)
        o[q] = bf16x2(h2f(ev, 0) * s8, h2f(ev, 1) * s8);
        o[4 + q] = bf16x2(h2f(od, 0) * s8, h2f(od, 1) * s8);
        nan_bytes |= ((~w[q] & 0x7F7F7F7Fu) - 0x01010101u);
      }
      acc ^= nan_bytes & 0x80808080u;
    } else {  // alu
      float f[16];
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int j = 0; j < 4; ++j) f[4 * q + j] = e4m3_scaled_down(w[q], j) * s120;
#pragma unroll
      for (int q = 0; q < 4; ++q) o[q] = bf16x2(f[4 * q], f[4 * q + 2]), o[4 + q] = bf16x2(f[4 * q + 1], f[4 * q + 3]);
    }
#pragma unroll
    for (int q = 0; q < 8; ++q) acc ^= o[q];
    v.x += 0x01010101u;  // (the next chunk: every byte moves, none from the results - a chain
    v.y += 0x03050709u;  // through acc would time the conversion's latency, not its rate)
    v.z += 0x00010001u;
    v.w ^= v.x;
  }
  const long long t1 = clock64();
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (threadIdx.x % 32 == 0) cycles[blockIdx.x * 12 + threadIdx.x / 32] = t1 - t0;
}

template <int kMode>
double run(int warps, int sms, const uint4* seed, uint32_t* out, long long* cyc) {
  convert_rate<kMode><<<sms, 32 * warps>>>(seed, 0.0371f, out, cyc);
  if (cudaDeviceSynchronize() != cudaSuccess) return -1;
  long long h[12];
  cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost);  // block 0's warps
  double worst = 0;
  for (int i = 0; i < warps; ++i) worst = h[i] > worst ? double(h[i]) : worst;
  return worst / kChunks;  // cycles per chunk per warp (the slowest warp of block 0)
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  uint4 h_seed[64];
  for (int i = 0; i < 64; ++i) h_seed[i] = make_uint4(0x3A2B1C0Du * (i + 1), 0x12345678u + i, 0x0F1E2D3Cu ^ i, 0x55AA33CCu + 7 * i);
  uint4* seed;
  uint32_t* out;
  long long* cyc;
  cudaMalloc(&seed, sizeof h_seed);
  cudaMalloc(&out, size_t(sms) * 384 * 4);
  cudaMalloc(&cyc, size_t(sms) * 12 * 8);
  cudaMemcpy(seed, h_seed, sizeof h_seed, cudaMemcpyHostToDevice);
  const char* names[5] = {"exact", "unpack", "pack", "alu", "int16"};
  std::printf("mode    warps/SMSP  cycles/chunk/warp  values/cycle/SMSP\n");
  for (int mode = 0; mode < 5; ++mode) {
    for (int per = 1; per <= 3; ++per) {
      const int warps = 4 * per;
      run<0>(warps, sms, seed, out, cyc);  // (warm-up)
      const double c = mode == 0   ? run<0>(warps, sms, seed, out, cyc)
                       : mode == 1 ? run<1>(warps, sms, seed, out, cyc)
                       : mode == 2 ? run<2>(warps, sms, seed, out, cyc)
                       : mode == 3 ? run<3>(warps, sms, seed, out, cyc)
                                   : run<4>(warps, sms, seed, out, cyc);
      if (c < 0) {
        std::printf("%s: kernel failed\n", names[mode]);
        return 2;
      }
      std::printf("%-7s %10d  %17.1f  %17.2f\n", names[mode], per, c, 32.0 * 16 * per / c);
    }
  }
  return 0;
}
