// A standalone probe of the fp8-operand MLA tile of NOTES item 43 e, on one warpgroup and one
// 64-token tile, before any kernel is built on it. It checks on the GPU what the numpy model
// (tools/mla_fp8_split_model.py) assumes and what the design needs:
//   1. S = Q K^T on fp8 tensor cores (wgmma m64n64k32 e4m3, both operands K-major, 128-byte
//      swizzle) with bf16 queries split into hi + lo e4m3 terms after a per-row power of two, the
//      two terms of each query row stacked in the rows r and r + 8 one thread holds, so one wgmma
//      makes both and the thread adds them: S's error against the exact product (float64).
//   2. The accumulator's precision: the same S with products summed in float32 on the host (what
//      full float32 accumulation would give) beside it.
//   3. O = P V on fp8 tensor cores (wgmma m64n256k32 e4m3, A from registers): P split the same way
//      (times 2^8) straight from S's accumulator registers into the A operand, with no shuffles,
//      because V^T is written with its tokens permuted to match (design point 3); V^T is the
//      tile's latent part transposed in shared memory with the 64-byte swizzle (descriptor mode 2).
//      O's error against the exact P V (float64, the device's own P).
//   4. The same O with P read from shared memory instead (wgmma m64n256k32 SS, A K-major with the
//      64-byte swizzle): how the seesaw's other warpgroup would take a tile's P.
//
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/wgmma_fp8_probe \
//     tools/wgmma_fp8_probe.cu && /tmp/wgmma_fp8_probe
//   /tmp/wgmma_fp8_probe [promote] [reps]: S's products summed in float32 every `promote` k-steps
//   of 32 (default 18: one accumulator), O accumulated over `reps` copies of the tile (default 1).
// Measured on the H100 (session 23, NOTES item 44 a): S max error / row's max |S| 1.19e-3 in one
// accumulator, 6.4e-4 / 3.8e-4 / 2.3e-4 promoted every 4 / 2 / 1 k-steps (float32 sums of the same
// products: 1.0e-6), so Hopper's fp8 products keep about 13 bits in their sums; O 5.1e-4 over one
// tile, 2.2e-3 / 9.3e-3 / 3.6e-2 over 16 / 64 / 256 tiles in one accumulator. Hence the narrow
// kernel (src/mla_decode/sm90/fp8_narrow.cuh) promotes S every 2 k-steps and O every tile.
// Prints the errors and PASS / FAIL: S within 2^-14 of each row's max |S| (the split is exact down
// to 2^-10 of each row's largest query; 2^-14 admits the model's pessimistic 14-bit fp8
// accumulation, and the float32 figure beside it says how far the hardware is from full float32
// sums), O within 2^-8 relative in both forms (P as hi + lo keeps 8 significant bits). Exit
// status 0 when all three pass; a layout or descriptor mistake shows as errors of order 1.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common/sm90/wgmma.cuh"

namespace jp = jaxpaged;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
namespace jaxpaged {
JP_WGMMA_M64N64K32_SS_F8AB(e4m3, e4m3)
JP_WGMMA_M64N256K32_RS_F8(e4m3)
JP_WGMMA_M64N256K32_SS_F8AB(e4m3, e4m3)
}  // namespace jaxpaged
#endif

constexpr int kRows = 32;    // real query rows (Hq x s_q <= 32: hi and lo stacked in one wgmma's 64)
constexpr int kKeys = 64;    // tokens per tile
constexpr int kWidth = 576;  // 512 latent + 64 rope, fp8 bytes per token
constexpr int kBlocks = 5;   // 128-byte column blocks per row (the rope block padded with zeros)
constexpr int kBlockBytes = 64 * 128;
constexpr int kQ = 0, kK = kBlocks * kBlockBytes, kVt = 2 * kBlocks * kBlockBytes;  // shared layout
constexpr int kVtBytes = 512 * 64;
constexpr int kP = kVt + kVtBytes;  // P hi / lo as an A operand in shared memory: 64 rows x 64 bytes
constexpr int kSmem = kP + 64 * 64;

// The query row whose hi / lo term sits in wgmma row m (rows 16 w + i: hi for i < 8, lo for i >= 8).
__host__ __device__ inline int real_row(int m) { return (m / 16) * 8 + (m % 8); }
// The token at position s of a 32-token k-block of the A operand, given P's accumulator layout:
// slot 4 c + i (i < 4) and 16 + 4 c + i hold the thread's (lane % 4 = c) values of tokens
// 8 (i / 2) + 2 c + (i % 2) and 16 + the same.
__host__ __device__ inline int slot_token(int s) {
  const int half = s / 16, c = (s % 16) / 4, i = s % 4;
  return 16 * half + 8 * (i / 2) + 2 * c + (i % 2);
}
// Byte offset of (row, byte col) in a matrix of 128-byte swizzled column blocks (64 rows each).
__host__ __device__ inline int sw128_byte(int row, int col) {
  return (col / 128) * kBlockBytes + jp::sw128_offset(row, (col % 128) / 16) + col % 16;
}
// Byte offset of (row, byte col) in a K-major matrix of 64-byte rows with the 64-byte swizzle
// (16-byte chunk c of row r at c ^ ((r / 2) % 4); 8-row atoms of 512 bytes).
__host__ __device__ inline int sw64_byte(int row, int col) {
  return row * 64 + (((col / 16) ^ ((row / 2) % 4)) * 16) + col % 16;
}

__device__ inline uint8_t to_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}
__device__ inline float from_e4m3(uint8_t b) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3);
  return __half2float(__half(h));
}

// q: [32][576] bf16 values as float; q_exp: per row, the power of two (exponent) of the split;
// kv: [64][576] e4m3 bytes. Out: s [32][64] (scaled scores), p [32][64], o [32][512].
__global__ void __launch_bounds__(128) probe_kernel(const float* q, const int* q_exp, const uint8_t* kv,
                                                    float scale, float* s_out, float* p_out, float* o_out,
                                                    float* o_ss_out, int promote, int reps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  // The swizzle atoms need a 1024-aligned base (the launch asks for 1 KiB more than the layout).
  unsigned char* smem = smem_raw + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < kVt; i += 128) smem[i] = 0;  // (the padded rope columns)
  __syncthreads();
  // Q split into hi / lo e4m3, stacked: query row i's hi term in wgmma row 16 (i / 8) + i % 8.
  for (int idx = tid; idx < kRows * kWidth; idx += 128) {
    const int i = idx / kWidth, col = idx % kWidth;
    const float x = ldexpf(q[idx], q_exp[i]);
    const uint8_t hi = to_e4m3(x);
    const uint8_t lo = to_e4m3(x - from_e4m3(hi));
    const int m = 16 * (i / 8) + i % 8;
    smem[kQ + sw128_byte(m, col)] = hi;
    smem[kQ + sw128_byte(m + 8, col)] = lo;
  }
  // The tile (as TMA would land it: rows of 128-byte swizzled column blocks).
  for (int idx = tid; idx < kKeys * kWidth; idx += 128) smem[kK + sw128_byte(idx / kWidth, idx % kWidth)] = kv[idx];
  __syncthreads();
  // V^T: row n (latent column), 64 bytes: position s holds token slot_token(s % 32) + 32 (s / 32).
  for (int idx = tid; idx < 512 * 64; idx += 128) {
    const int n = idx / 64, pos = idx % 64;
    const int t = 32 * (pos / 32) + slot_token(pos % 32);
    smem[kVt + sw64_byte(n, pos)] = smem[kK + sw128_byte(t, n)];
  }
  jp::fence_proxy_async_shared();
  __syncthreads();

  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  // S: 18 k-steps of 32 bytes (4 per latent block, 2 in the rope block's first 64 bytes).
  // Promoted every `promote` k-steps: each run of k-steps accumulates on the tensor cores from
  // zero and is added to d in float32 (Hopper's fp8 accumulator keeps fewer bits than float32).
  float d[32], part[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
#pragma unroll 1
  for (int k0 = 0; k0 < 18; k0 += promote) {
    jp::wgmma_fence();
#pragma unroll 1
    for (int k = k0; k < min(k0 + promote, 18); ++k) {
      const int blk = k / 4, off = 32 * (k % 4);
      const uint64_t a = jp::wgmma_desc_sw128(base + kQ + blk * kBlockBytes + off, 16, 1024);
      const uint64_t b = jp::wgmma_desc_sw128(base + kK + blk * kBlockBytes + off, 16, 1024);
      jp::wgmma_m64n64k32_ss_e4m3_e4m3(part, a, b, k > k0);
    }
    jp::wgmma_commit();
    jp::wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] += part[i];
  }
  // This thread's query row: hi in row r_lo, lo in row r_hi = r_lo + 8 (both its own).
  const int r_lo = warp * 16 + lane / 4, row = real_row(r_lo), c = lane % 4;
  const float unscale = ldexpf(scale, -q_exp[row]);
  float sv[16];  // tokens 8 j + 2 c + e, e = 0, 1, j = 0..7
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sv[2 * j + e] = (d[4 * j + e] + d[4 * j + 2 + e]) * unscale;
      mx = fmaxf(mx, sv[2 * j + e]);
    }
  }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  // P split straight into the A operand: k-block kk, register 0 = P hi of slots 4 c..4 c + 3
  // (tokens 32 kk + 2 c, + 1, + 8, + 9), 1 = P lo of the same, 2 / 3 = slots 16 + 4 c.. (tokens
  // 32 kk + 16 + 2 c, + 1, + 24, + 25).
  uint32_t a_regs[2][4] = {};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float p = exp2f((sv[2 * j + e] - mx) * 1.4426950408889634f);
      const int tok = 8 * j + 2 * c + e;
      s_out[row * kKeys + tok] = sv[2 * j + e];
      p_out[row * kKeys + tok] = p;
      const uint32_t hi = to_e4m3(p * 256.f), lo = to_e4m3(p * 256.f - from_e4m3(hi));
      const int kk = j / 4, jj = j % 4;            // k-block; 8-token group within it
      const int reg = 2 * (jj / 2), byte = 2 * (jj % 2) + e;
      a_regs[kk][reg] |= hi << (8 * byte);
      a_regs[kk][reg + 1] |= lo << (8 * byte);
    }
  }
  // P as the A operand in shared memory too (row r_lo: hi, r_hi: lo; column = slot), for the SS form.
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const int m = r_lo + 8 * (reg % 2), slot0 = 32 * kk + 16 * (reg / 2) + 4 * c;
#pragma unroll
      for (int i = 0; i < 4; ++i) smem[kP + sw64_byte(m, slot0 + i)] = uint8_t(a_regs[kk][reg] >> (8 * i));
    }
  }
  jp::fence_proxy_async_shared();
  __syncthreads();
  // O = P V: two halves of 256 latent columns, two k-blocks each; P from registers (form 0) and
  // from shared memory (form 1).
#pragma unroll 1
  for (int hf = 0; hf < 4; ++hf) {
    const int h = hf % 2, form = hf / 2;
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;
    jp::wgmma_fence();
#pragma unroll 1
    for (int rep = 0; rep < (form == 0 ? reps : 1); ++rep) {  // (form 0: the same tile `reps` times)
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      // 64-byte swizzle: mode 2 in bits 62-63; 8 rows of 64 bytes = 512 bytes between row groups.
      uint64_t b = jp::wgmma_desc_sw128(base + kVt + h * 256 * 64 + 32 * kk, 16, 512);
      b = (b & ~(uint64_t(3) << 62)) | (uint64_t(2) << 62);
      if (form == 0) {
        jp::wgmma_m64n256k32_rs_e4m3(o, a_regs[kk], b, 1);
      } else {
        uint64_t a = jp::wgmma_desc_sw128(base + kP + 32 * kk, 16, 512);
        a = (a & ~(uint64_t(3) << 62)) | (uint64_t(2) << 62);
        jp::wgmma_m64n256k32_ss_e4m3_e4m3(o, a, b, 1);
      }
    }
    }
    jp::wgmma_commit();
    jp::wgmma_wait<0>();
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        (form ? o_ss_out : o_out)[row * 512 + h * 256 + 8 * j + 2 * c + e] =
            (o[4 * j + e] + o[4 * j + 2 + e]) * (1.f / 256.f) / float(form == 0 ? reps : 1);
      }
    }
  }
#endif
}

static float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &u, 4);
  return x;
}
static double e4m3_value(uint8_t b) {
  const int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return sign ? -v : v;
}

int main(int argc, char** argv) {
  std::mt19937 gen(0);
  std::normal_distribution<float> normal;
  std::vector<float> q(kRows * kWidth);
  std::vector<int> q_exp(kRows);
  for (int i = 0; i < kRows; ++i) {
    // Rows of different magnitudes, some spanning many binades.
    const float mag = std::ldexp(1.f, int(i % 7) * 3 - 9);
    float mx = 0.f;
    for (int k = 0; k < kWidth; ++k) {
      float x = normal(gen) * mag;
      if (i % 4 == 3) x *= std::ldexp(1.f, int(gen() % 13) - 12);
      q[i * kWidth + k] = bf16_round(x);
      mx = std::fmax(mx, std::fabs(q[i * kWidth + k]));
    }
    q_exp[i] = int(std::floor(std::log2(448.0 / mx)));  // largest |q| 2^e into (224, 448]
  }
  std::vector<uint8_t> kv(kKeys * kWidth);
  for (auto& b : kv) {
    do b = uint8_t(gen() & 0xFF);
    while ((b & 0x7F) == 0x7F || ((b >> 3) & 15) > 10);  // no NaN; |v| < 2^4 keeps S moderate
  }
  const float scale = 1.f / std::sqrt(192.f);

  float *dq, *ds, *dp, *dout, *dout_ss;
  int* de;
  uint8_t* dkv;
  cudaMalloc(&dq, q.size() * 4);
  cudaMalloc(&de, kRows * 4);
  cudaMalloc(&dkv, kv.size());
  cudaMalloc(&ds, kRows * kKeys * 4);
  cudaMalloc(&dp, kRows * kKeys * 4);
  cudaMalloc(&dout, kRows * 512 * 4);
  cudaMalloc(&dout_ss, kRows * 512 * 4);
  cudaMemcpy(dq, q.data(), q.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(de, q_exp.data(), kRows * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dkv, kv.data(), kv.size(), cudaMemcpyHostToDevice);
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem + 1024);
  const int promote = argc > 1 ? std::atoi(argv[1]) : 18;
  // O from registers accumulated over `reps` copies of the tile (a sequence of reps tiles).
  const int reps = argc > 2 ? std::atoi(argv[2]) : 1;
  std::printf("S promoted to float32 every %d k-steps of 32; O (registers) accumulated over %d tiles\n", promote, reps);
  probe_kernel<<<1, 128, kSmem + 1024>>>(dq, de, dkv, scale, ds, dp, dout, dout_ss, promote, reps);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("launch failed: %s\n", cudaGetErrorString(err));
    return 2;
  }
  std::vector<float> s(kRows * kKeys), p(kRows * kKeys), o(kRows * 512), o_ss(kRows * 512);
  cudaMemcpy(s.data(), ds, s.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(p.data(), dp, p.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(o.data(), dout, o.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(o_ss.data(), dout_ss, o_ss.size() * 4, cudaMemcpyDeviceToHost);

  // 1-2: S against the exact product, and what float32 accumulation of exact products gives.
  double s_err = 0, s_f32_err = 0, s_max = 0;
  for (int i = 0; i < kRows; ++i) {
    double row_max = 0, row_err = 0, row_f32 = 0;
    for (int t = 0; t < kKeys; ++t) {
      double exact = 0;
      float acc = 0.f;
      for (int k = 0; k < kWidth; ++k) {
        const double prod = double(q[i * kWidth + k]) * e4m3_value(kv[t * kWidth + k]);
        exact += prod;
        acc += float(prod);
      }
      exact *= scale;
      row_max = std::fmax(row_max, std::fabs(exact));
      row_err = std::fmax(row_err, std::fabs(s[i * kKeys + t] - exact));
      row_f32 = std::fmax(row_f32, std::fabs(double(acc) * scale - exact));
    }
    s_err = std::fmax(s_err, row_err / row_max);
    s_f32_err = std::fmax(s_f32_err, row_f32 / row_max);
    s_max = std::fmax(s_max, row_max);
  }
  // 3: O against the exact P V of the device's P.
  double o_num = 0, o_den = 0, ss_num = 0;
  for (int i = 0; i < kRows; ++i) {
    for (int n = 0; n < 512; ++n) {
      double exact = 0;
      for (int t = 0; t < kKeys; ++t) exact += double(p[i * kKeys + t]) * e4m3_value(kv[t * kWidth + n]);
      o_num += (o[i * 512 + n] - exact) * (o[i * 512 + n] - exact);
      ss_num += (o_ss[i * 512 + n] - exact) * (o_ss[i * 512 + n] - exact);
      o_den += exact * exact;
    }
  }
  const double o_err = std::sqrt(o_num / o_den), ss_err = std::sqrt(ss_num / o_den);
  const bool s_ok = s_err <= std::ldexp(1.0, -14), o_ok = o_err <= std::ldexp(1.0, -8);
  const bool ss_ok = ss_err <= std::ldexp(1.0, -8);
  std::printf("S = Q K^T (split queries, stacked rows): max error / row's max |S| %.2e (float32 accumulation "
              "of exact products: %.2e) %s\n", s_err, s_f32_err, s_ok ? "PASS" : "FAIL");
  std::printf("O = P V (P split in registers, permuted V^T, 64-byte swizzle): rel error %.2e %s\n", o_err,
              o_ok ? "PASS" : "FAIL");
  std::printf("O = P V (P from shared memory, 64-byte swizzle, SS form): rel error %.2e %s\n", ss_err,
              ss_ok ? "PASS" : "FAIL");
  return s_ok && o_ok && ss_ok ? 0 : 1;
}
