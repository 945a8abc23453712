// A standalone probe of NOTES item 46 f's design for the wide quantized MLA path, before any kernel
// is built on it: the cache tile as the *register A operand* of the transposed product
//   S^T = K Q^T   (m64 = the tile's 64 tokens, n64 = 64 query rows, k576 = 36 k16 steps)
// on 16-bit tensor cores (wgmma m64n64k16 f16, A from registers, B = Q^T from shared memory,
// K-major, 128-byte swizzle). K stays raw e4m3 in shared memory, laid out as TMA lands it (rows of
// 128-byte swizzled column blocks); each warp loads its 16 tokens with ldmatrix (x4: 16 tokens x 32
// bytes = two k16 steps) and converts in registers (cvt.rn.f16x2.e4m3x2: exact). ldmatrix gives a
// thread bytes 4c..4c+3 of a 16-byte row (c = lane % 4) where the f16 A layout wants k-positions
// 2c, 2c+1, 2c+8, 2c+9, so position p of each 16-dim group holds dim perm(p) = 4 ((p % 8) / 2) +
// 2 (p / 8) + p % 2, and Q^T is stored with its dims in that order (a sum over dims does not care).
//
// And the other product of the design,
//   O^T = V^T P^T  (m = latent columns in blocks of 64, n64 query rows, k64 tokens),
// with V^T's fragments taken from the same raw tile by ldmatrix .trans of byte pairs (x4: 32
// tokens x 16 bytes) and two byte_perms: a thread then holds latent columns 2g and 2g + 1 (g =
// lane / 4) of its warp's 16, at tokens 2c, 2c+1, 2c+8, 2c+9 - the A layout's k-positions in
// natural token order, with the M rows (latent columns) permuted instead: row g of warp w's 16
// is column 16 w + 2 g, row g + 8 is 16 w + 2 g + 1 (a relabelling of O's columns for the
// epilogue; P^T needs no permutation).
//
// It checks on one warpgroup:
//   1. S^T and O^T against the exact products (float64 on the host): expected float32-
//      accumulation error (~1e-6 of the largest value); a layout or permutation mistake shows as
//      errors of order 1.
//   2. The cost of S^T: clock64 cycles per tile over `reps` tiles, with D = 1, 2, 3, 4 sets of A
//      registers in flight (a register A operand may not be overwritten until its wgmma group is
//      waited for: wgmma_wait<D - 1> before each reload). The tensor work alone is ~1100 cycles a
//      tile at the H100's boost clock (4.7 MFLOP at ~4.3 KFLOP per cycle and SM); O^T's half of a
//      tile (256 columns: 16 products) is timed the same way with two sets.
//
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/wgmma_rega_probe \
//     tools/wgmma_rega_probe.cu && /tmp/wgmma_rega_probe [reps]
// Session 27 added two checks for NOTES item 48 h's 656-byte design (compiled, not yet run): the
// same S^T and O^T with a per-(token, 128-dim group) f16 scale multiplied into the A registers
// after the conversion (HMUL2), against a reference that rounds each value x scale to f16.
// Written in session 25 (compiled for sm_90a here, ptxas: no wgmma serialization warning);
// not yet run on a GPU. Exit status 0 when S^T and O^T are within 1e-5 of their rows' largest
// values.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "common/sm90/wgmma.cuh"

namespace jp = jaxpaged;

constexpr int kTokens = 64, kRows = 64, kWidth = 576;
constexpr int kBlockBytes = 64 * 128;     // a 128-byte column block of 64 rows
constexpr int kKBlocks = 5;               // K: 576 bytes a token (the fifth block half used)
constexpr int kQBlocks = 9;               // Q^T: 576 f16 a row = 1152 bytes
constexpr int kK = 0, kQ = kKBlocks * kBlockBytes, kSmem = kQ + kQBlocks * kBlockBytes;

// The dim held at k-position p of a 16-dim group (see the header).
__host__ __device__ inline int perm(int p) { return 4 * ((p % 8) / 2) + 2 * (p / 8) + p % 2; }
__host__ __device__ inline int sw128_byte(int row, int col) {
  return (col / 128) * kBlockBytes + jp::sw128_offset(row, (col % 128) / 16) + col % 16;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// (the kernels' helpers: wgmma.cuh)
using jp::ldmatrix_x4;
using jp::ldmatrix_x4_trans;
using jp::wgmma_m64n64k16_rs_f16;
// a x b per f16 half, rounded to nearest (NOTES item 48 h: a 656-byte row's group scale applied to
// two converted values).
__device__ __forceinline__ uint32_t hmul2_bits(uint32_t a, uint32_t b) {
  uint32_t out;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(out) : "r"(a), "r"(b));
  return out;
}
// Two e4m3 values (the low 16 bits: byte 0 -> low half) as f16x2, exactly.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {
  uint32_t out;
  asm("{\n.reg .b16 t;\ncvt.u16.u32 t, %1;\ncvt.rn.f16x2.e4m3x2 %0, t;\n}\n" : "=r"(out) : "r"(two));
  return out;
}
#endif

// kv: [64][576] e4m3 bytes; qh: [64][576] f16 bits. s_out: [64 tokens][64 rows] (one tile, reps = 1).
// kScaled (NOTES item 48 h's 656-byte design): the latent dims' values are multiplied in registers by
// sc[token][dim / 128] (f16 bits, [64][4]) after the conversion - an A register holds two dims of one
// token, so one HMUL2 by {s, s}; the last 64 dims (the rope here) stay unscaled.
template <int D, bool kScaled = false>
__global__ void __launch_bounds__(128) probe_kernel(const uint8_t* kv, const uint16_t* qh, float* s_out, int reps,
                                                    long long* cycles, const uint16_t* sc = nullptr) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int i = tid; i < kSmem; i += 128) smem[i] = 0;
  __syncthreads();
  for (int idx = tid; idx < kTokens * kWidth; idx += 128) smem[kK + sw128_byte(idx / kWidth, idx % kWidth)] = kv[idx];
  // Q^T: row n, k-position P = 16 j + p holds dim 16 j + perm(p), as f16 (2 bytes).
  for (int idx = tid; idx < kRows * kWidth; idx += 128) {
    const int n = idx / kWidth, pos = idx % kWidth;
    const uint16_t v = qh[n * kWidth + 16 * (pos / 16) + perm(pos % 16)];
    *reinterpret_cast<uint16_t*>(smem + kQ + sw128_byte(n, 2 * pos)) = v;
  }
  jp::fence_proxy_async_shared();
  __syncthreads();
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  // This lane's ldmatrix row: token 16 warp + lane % 8 + 8 ((lane / 8) % 2), bytes 16 (lane / 16).
  const int tok = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2), half = lane / 16;
  float d[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  uint32_t a[D][8];
  const long long t0 = clock64();
#pragma unroll 1
  for (int r = 0; r < reps; ++r) {
#pragma unroll
    for (int kk = 0; kk < 18; ++kk) {  // 32 bytes (two k16 steps) per ldmatrix x4
      uint32_t (&set)[8] = a[kk % D];
      jp::wgmma_wait<D - 1>();  // the group that last read this set is done
      uint32_t raw[4];
      ldmatrix_x4(raw, base + kK + sw128_byte(tok, 32 * kk + 16 * half));
      // raw[0]: tokens g, bytes 4c..4c+3 of dims 32kk..+15; raw[1]: tokens g+8; raw[2], raw[3]: dims +16.
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        set[4 * s + 0] = e4m3x2_to_f16x2(raw[2 * s]);              // row g, positions 2c, 2c+1
        set[4 * s + 1] = e4m3x2_to_f16x2(raw[2 * s + 1]);          // row g+8
        set[4 * s + 2] = e4m3x2_to_f16x2(raw[2 * s] >> 16);        // row g, positions 2c+8, 2c+9
        set[4 * s + 3] = e4m3x2_to_f16x2(raw[2 * s + 1] >> 16);    // row g+8
      }
      if constexpr (kScaled) {
        if (kk < 16) {  // dims 32 kk .. + 31: group kk / 4 of tokens 16 warp + lane / 4 (+ 8)
          const int t_lo = 16 * warp + lane / 4, grp = kk / 4;
          const uint32_t s_lo = sc[t_lo * 4 + grp] * 0x10001u, s_hi = sc[(t_lo + 8) * 4 + grp] * 0x10001u;
#pragma unroll
          for (int i = 0; i < 8; ++i) set[i] = hmul2_bits(set[i], i % 2 ? s_hi : s_lo);
        }
      }
      jp::wgmma_fence();
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const int step = 2 * kk + s;  // k16 step: Q^T bytes 32 step of each row
        const uint64_t b = jp::wgmma_desc_sw128(base + kQ + (32 * step / 128) * kBlockBytes + (32 * step) % 128, 16, 1024);
        wgmma_m64n64k16_rs_f16(d, set + 4 * s, b, r > 0 || step > 0);
      }
      jp::wgmma_commit();
    }
  }
  jp::wgmma_wait<0>();
  const long long t1 = clock64();
  if (tid == 0) *cycles = t1 - t0;
  // Accumulator: rows (tokens) 16 warp + lane / 4 (+8), columns (query rows) 8 j + 2 (lane % 4) + e.
  const int g = 16 * warp + lane / 4, c = lane % 4;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      s_out[g * kRows + 8 * j + 2 * c + e] = d[4 * j + e];
      s_out[(g + 8) * kRows + 8 * j + 2 * c + e] = d[4 * j + 2 + e];
    }
  }
#endif
}

// O^T for latent columns [0, 256) (four m64 blocks, one warpgroup's half in the design): kv as
// above, ph: P [64 rows][64 tokens] f16 bits. o_out: [256 columns][64 rows] (reps = 1).
// kScaled: V's values multiplied by sc[token][column / 128] in registers - an A register holds one
// column at two tokens, so one HMUL2 by {s_t0, s_t1} (NOTES item 48 h).
template <bool kScaled = false>
__global__ void __launch_bounds__(128) probe_ot_kernel(const uint8_t* kv, const uint16_t* ph, float* o_out, int reps,
                                                       long long* cycles, const uint16_t* sc = nullptr) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  constexpr int kP = kQ;  // P^T: 64 rows x 64 tokens of f16 = one 128-byte column block
  for (int idx = tid; idx < kTokens * kWidth; idx += 128) smem[kK + sw128_byte(idx / kWidth, idx % kWidth)] = kv[idx];
  for (int idx = tid; idx < kRows * kTokens; idx += 128) {
    *reinterpret_cast<uint16_t*>(smem + kP + sw128_byte(idx / kTokens, 2 * (idx % kTokens))) = ph[idx];
  }
  jp::fence_proxy_async_shared();
  __syncthreads();
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  float o[4][32];
#pragma unroll
  for (int m = 0; m < 4; ++m) {
#pragma unroll
    for (int i = 0; i < 32; ++i) o[m][i] = 0.f;
  }
  uint32_t a[2][8];
  const long long t0 = clock64();
#pragma unroll 1
  for (int r = 0; r < reps; ++r) {
#pragma unroll
    for (int m = 0; m < 4; ++m) {      // m64 block of latent columns
#pragma unroll
      for (int h = 0; h < 2; ++h) {    // 32 tokens: two k16 steps per ldmatrix x4 .trans
        uint32_t (&set)[8] = a[(2 * m + h) % 2];
        jp::wgmma_wait<1>();
        uint32_t raw[4];
        // lane l: token 32 h + l, bytes (columns) 64 m + 16 warp .. + 15; matrix q = l / 8 holds
        // tokens 32 h + 8 q .. + 7.
        ldmatrix_x4_trans(raw, base + kK + sw128_byte(32 * h + lane, 64 * m + 16 * warp));
        // raw[q]: tokens 8 q + 2c, + 1 (c = lane % 4) x columns 2g, 2g + 1 (g = lane / 4), as
        // [tok 2c: col 2g, col 2g+1, tok 2c+1: col 2g, col 2g+1].
#pragma unroll
        for (int s = 0; s < 2; ++s) {  // k16 step: tokens 32 h + 16 s + {2c, 2c+1, 2c+8, 2c+9}
          const uint32_t even = __byte_perm(raw[2 * s], raw[2 * s + 1], 0x6420);  // column 2g
          const uint32_t odd = __byte_perm(raw[2 * s], raw[2 * s + 1], 0x7531);   // column 2g + 1
          set[4 * s + 0] = e4m3x2_to_f16x2(even);        // row g (column 2g), tokens 2c, 2c+1
          set[4 * s + 1] = e4m3x2_to_f16x2(odd);         // row g + 8 (column 2g + 1)
          set[4 * s + 2] = e4m3x2_to_f16x2(even >> 16);  // row g, tokens 2c+8, 2c+9
          set[4 * s + 3] = e4m3x2_to_f16x2(odd >> 16);   // row g + 8
          if constexpr (kScaled) {  // columns of block m: group m / 2; tokens 32 h + 16 s + 2c (+1, +8, +9)
            const int t0 = 32 * h + 16 * s + 2 * (lane % 4), grp = m / 2;
            const uint32_t s01 = sc[t0 * 4 + grp] | uint32_t(sc[(t0 + 1) * 4 + grp]) << 16;
            const uint32_t s89 = sc[(t0 + 8) * 4 + grp] | uint32_t(sc[(t0 + 9) * 4 + grp]) << 16;
            set[4 * s + 0] = hmul2_bits(set[4 * s + 0], s01);
            set[4 * s + 1] = hmul2_bits(set[4 * s + 1], s01);
            set[4 * s + 2] = hmul2_bits(set[4 * s + 2], s89);
            set[4 * s + 3] = hmul2_bits(set[4 * s + 3], s89);
          }
        }
        jp::wgmma_fence();
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const int step = 2 * h + s;  // P^T bytes 32 step of each row
          const uint64_t b = jp::wgmma_desc_sw128(base + kP + 32 * step, 16, 1024);
          wgmma_m64n64k16_rs_f16(o[m], set + 4 * s, b, r > 0 || step > 0);
        }
        jp::wgmma_commit();
      }
    }
  }
  jp::wgmma_wait<0>();
  const long long t1 = clock64();
  if (tid == 0) *cycles = t1 - t0;
  // Accumulator of block m: M rows 16 warp + g (column 64 m + 16 warp + 2 g) and + 8 (column + 1),
  // N columns (query rows) 8 j + 2 c + e.
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int col = 64 * m + 16 * warp + 2 * g;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        o_out[col * kRows + 8 * j + 2 * c + e] = o[m][4 * j + e];
        o_out[(col + 1) * kRows + 8 * j + 2 * c + e] = o[m][4 * j + 2 + e];
      }
    }
  }
#endif
}


// ---- Timing of the design's pieces (session 26): the S^T cycles above stayed at ~2450 a tile
// for D = 2, 3 and 4, so the A registers' reuse wait is not what bounds them. What is: the
// tensor cores' rate with A from registers at N = 64, or the chain ldmatrix -> cvt -> wgmma
// issued in one warp's order? Per rep, each of WGS warpgroups (sharing the operands in shared
// memory, as the design's two compute warpgroups share Q^T) computes
//   S^T of one tile (64 tokens x 64 rows x 576) by SMODE, waited for (the softmax needs it):
//     0: both operands from shared memory (K as f16, K-major): the tensor cores' own rate;
//     1: A from registers converted once before the loop (no ldmatrix / cvt per step);
//     2: the check's scheme above (per two k-steps: wait, ldmatrix, cvt, fence, 2 wgmma);
//     3: software-pipelined: the next group's ldmatrix issued before this group's wgmmas, its
//        conversion after them (two sets of A registers), groups of SG k-steps;
//   then OT tiles of O^T for 256 latent columns (64 tokens each, 16 wgmma m64n64k16) by OMODE
//   (1, 2, 3 as for S^T, with ldmatrix .trans + byte_perm), waited for at the rep's end.
// The design's pair of tiles per warpgroup is S^T of one tile and O^T over two (OT = 2) with
// WGS = 2; the tensor work alone is then ~2 x 1100 + 4 x 500 cycles per rep for both
// warpgroups together.
constexpr int kKh = kQ + kQBlocks * kBlockBytes;      // K as f16 (SMODE 0): 9 blocks
constexpr int kPt = kKh + kQBlocks * kBlockBytes;     // P^T: one block
constexpr int kTimingSmem = kPt + kBlockBytes;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// S^T's A fragments of k-steps 2 kk and 2 kk + 1 from raw (an ldmatrix x4 of the K tile).
__device__ __forceinline__ void st_convert(uint32_t* set, const uint32_t (&raw)[4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    set[4 * s + 0] = e4m3x2_to_f16x2(raw[2 * s]);
    set[4 * s + 1] = e4m3x2_to_f16x2(raw[2 * s + 1]);
    set[4 * s + 2] = e4m3x2_to_f16x2(raw[2 * s] >> 16);
    set[4 * s + 3] = e4m3x2_to_f16x2(raw[2 * s + 1] >> 16);
  }
}
// S^T's A fragments as a 656-byte row's bf16 reading would make them (SMODE 4, timing only): each
// e4m3 pair to f16x2 (the halves split by a mov, as the wide kernel does), then to two floats, times
// its token's group scale, rounded to bf16x2 - value x scale in bf16, ds_dequant="bfloat16"'s rule.
__device__ __forceinline__ uint32_t scaled_bf16x2(uint32_t h2, float scale) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h2));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const uint32_t*>(&b);
}
__device__ __forceinline__ void st_convert_656(uint32_t* set, const uint32_t (&raw)[4], float sc_lo, float sc_hi) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // raw[2s]: token g (scale sc_lo); raw[2s + 1]: token g + 8
      uint32_t lo, hi;
      asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
          : "=r"(lo), "=r"(hi)
          : "r"(raw[2 * s + r]));
      set[4 * s + r] = scaled_bf16x2(lo, r ? sc_hi : sc_lo);
      set[4 * s + 2 + r] = scaled_bf16x2(hi, r ? sc_hi : sc_lo);
    }
  }
}
// O^T's A fragments of two k-steps from raw (an ldmatrix x4 .trans of the V tile).
__device__ __forceinline__ void ot_convert(uint32_t* set, const uint32_t (&raw)[4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const uint32_t even = __byte_perm(raw[2 * s], raw[2 * s + 1], 0x6420);
    const uint32_t odd = __byte_perm(raw[2 * s], raw[2 * s + 1], 0x7531);
    set[4 * s + 0] = e4m3x2_to_f16x2(even);
    set[4 * s + 1] = e4m3x2_to_f16x2(odd);
    set[4 * s + 2] = e4m3x2_to_f16x2(even >> 16);
    set[4 * s + 3] = e4m3x2_to_f16x2(odd >> 16);
  }
}

#endif

template <int SMODE, int SG, int OMODE, int OT, int WGS>
__global__ void __launch_bounds__(128 * WGS) timing_kernel(const uint8_t* kv, int reps, long long* cycles,
                                                           float* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  const int tid = threadIdx.x, tw = tid % 128, warp = tw / 32, lane = tid % 32;
  for (int i = tid; i < kTimingSmem; i += blockDim.x) smem[i] = 0;
  __syncthreads();
  for (int idx = tid; idx < kTokens * kWidth; idx += blockDim.x) smem[kK + sw128_byte(idx / kWidth, idx % kWidth)] = kv[idx];
  jp::fence_proxy_async_shared();
  __syncthreads();
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int tok = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2), half = lane / 16;
  auto q_desc = [&](int step) {
    return jp::wgmma_desc_sw128(base + kQ + (32 * step / 128) * kBlockBytes + (32 * step) % 128, 16, 1024);
  };
  auto st_addr = [&](int kk) { return base + kK + sw128_byte(tok, 32 * kk + 16 * half); };
  // O^T group gi = (m-block gi / 2, 32 tokens gi % 2) of tile t (the same raw tile each time).
  auto ot_addr = [&](int gi) { return base + kK + sw128_byte(32 * (gi % 2) + lane, 64 * (gi / 2) + 16 * warp); };
  auto p_desc = [&](int step) { return jp::wgmma_desc_sw128(base + kPt + 32 * step, 16, 1024); };
  float d[32], o[4][32];
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int i = 0; i < 32; ++i) o[m][i] = 0.f;
  uint32_t fixed[8];
  {
    uint32_t raw[4];
    ldmatrix_x4(raw, st_addr(0));
    st_convert(fixed, raw);
  }
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 1
  for (int r = 0; r < reps; ++r) {
    // ---- S^T
    if constexpr (SMODE == 0) {
      jp::wgmma_fence();
#pragma unroll
      for (int step = 0; step < 36; ++step) {
        const uint64_t a = jp::wgmma_desc_sw128(base + kKh + (32 * step / 128) * kBlockBytes + (32 * step) % 128, 16, 1024);
        jp::wgmma_m64n64k16_ss_f16(d, a, q_desc(step), 1);
      }
      jp::wgmma_commit();
    } else if constexpr (SMODE == 1) {
      jp::wgmma_fence();
#pragma unroll
      for (int step = 0; step < 36; ++step) wgmma_m64n64k16_rs_f16(d, fixed + 4 * (step % 2), q_desc(step), 1);
      jp::wgmma_commit();
    } else if constexpr (SMODE == 2) {
      uint32_t a[2][8];
#pragma unroll
      for (int kk = 0; kk < 18; ++kk) {
        jp::wgmma_wait<1>();
        uint32_t raw[4];
        ldmatrix_x4(raw, st_addr(kk));
        st_convert(a[kk % 2], raw);
        jp::wgmma_fence();
#pragma unroll
        for (int s = 0; s < 2; ++s) wgmma_m64n64k16_rs_f16(d, a[kk % 2] + 4 * s, q_desc(2 * kk + s), 1);
        jp::wgmma_commit();
      }
    } else if constexpr (SMODE == 4) {
      // 656-byte rows read in bf16 (timing only: the values are the K tile's bytes, the scales
      // this thread's two tokens' per group, Q^T's bytes read as bf16), pipelined as SMODE 3, SG 2.
      uint32_t raw[4], a[2][8];
      const float sc_lo = 1.f + 0.125f * (lane % 8), sc_hi = 0.75f + 0.125f * (lane % 8);
      ldmatrix_x4(raw, st_addr(0));
#pragma unroll
      for (int g = 0; g < 18; ++g) {
        jp::wgmma_wait<1>();
        const float grp = 1.f + 0.25f * (g / 4);  // (a different scale per 128 columns)
        st_convert_656(a[g % 2], raw, sc_lo * grp, sc_hi * grp);
        if (g + 1 < 18) ldmatrix_x4(raw, st_addr(g + 1));
        jp::wgmma_fence();
#pragma unroll
        for (int s = 0; s < 2; ++s) jp::wgmma_m64n64k16_rs_bf16(d, a[g % 2] + 4 * s, q_desc(2 * g + s), 1);
        jp::wgmma_commit();
      }
    } else {
      constexpr int kL = SG / 2;  // ldmatrix x4 per group
      constexpr int kGroups = 36 / SG;
      uint32_t raw[kL][4], a[2][4 * SG];
#pragma unroll
      for (int l = 0; l < kL; ++l) ldmatrix_x4(raw[l], st_addr(l));
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        jp::wgmma_wait<1>();  // the group that last read set g % 2 (g - 2) is done
#pragma unroll
        for (int l = 0; l < kL; ++l) st_convert(a[g % 2] + 8 * l, raw[l]);
        if (g + 1 < kGroups) {
#pragma unroll
          for (int l = 0; l < kL; ++l) ldmatrix_x4(raw[l], st_addr((g + 1) * kL + l));
        }
        jp::wgmma_fence();
#pragma unroll
        for (int s = 0; s < SG; ++s) wgmma_m64n64k16_rs_f16(d, a[g % 2] + 4 * s, q_desc(SG * g + s), 1);
        jp::wgmma_commit();
      }
    }
    jp::wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) jp::reg_fence(d[i]);
    // ---- O^T over OT tiles
#pragma unroll 1
    for (int t = 0; t < OT; ++t) {
      if constexpr (OMODE == 1) {
        jp::wgmma_fence();
#pragma unroll
        for (int gi = 0; gi < 8; ++gi)
#pragma unroll
          for (int s = 0; s < 2; ++s) wgmma_m64n64k16_rs_f16(o[gi / 2], fixed + 4 * s, p_desc(2 * (gi % 2) + s), 1);
        jp::wgmma_commit();
      } else if constexpr (OMODE == 2) {
        uint32_t a[2][8];
#pragma unroll
        for (int gi = 0; gi < 8; ++gi) {
          jp::wgmma_wait<1>();
          uint32_t raw[4];
          ldmatrix_x4_trans(raw, ot_addr(gi));
          ot_convert(a[gi % 2], raw);
          jp::wgmma_fence();
#pragma unroll
          for (int s = 0; s < 2; ++s) wgmma_m64n64k16_rs_f16(o[gi / 2], a[gi % 2] + 4 * s, p_desc(2 * (gi % 2) + s), 1);
          jp::wgmma_commit();
        }
      } else {
        uint32_t raw[4], a[2][8];
        ldmatrix_x4_trans(raw, ot_addr(0));
#pragma unroll
        for (int gi = 0; gi < 8; ++gi) {
          jp::wgmma_wait<1>();
          ot_convert(a[gi % 2], raw);
          if (gi + 1 < 8) ldmatrix_x4_trans(raw, ot_addr(gi + 1));
          jp::wgmma_fence();
#pragma unroll
          for (int s = 0; s < 2; ++s) wgmma_m64n64k16_rs_f16(o[gi / 2], a[gi % 2] + 4 * s, p_desc(2 * (gi % 2) + s), 1);
          jp::wgmma_commit();
        }
      }
    }
    jp::wgmma_wait<0>();
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int i = 0; i < 32; ++i) jp::reg_fence(o[m][i]);
  }
  __syncthreads();
  const long long t1 = clock64();
  if (tid == 0) *cycles = t1 - t0;
  float acc = 0.f;  // (keeps the products live)
#pragma unroll
  for (int i = 0; i < 32; ++i) acc += d[i] + o[0][i] + o[1][i] + o[2][i] + o[3][i];
  sink[tid] = acc;
#endif
}

template <int SMODE, int SG, int OMODE, int OT, int WGS>
static double time_design(const uint8_t* d_kv, long long* d_cycles, float* d_sink, int reps) {
  auto kern = timing_kernel<SMODE, SG, OMODE, OT, WGS>;
  if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kTimingSmem + 1024) != cudaSuccess) return -1;
  long long c = 0;
  for (int rep_count : {2, reps}) {  // (a warm-up launch first)
    kern<<<1, 128 * WGS, kTimingSmem + 1024>>>(d_kv, rep_count, d_cycles, d_sink);
    if (cudaDeviceSynchronize() != cudaSuccess) return -1;
  }
  cudaMemcpy(&c, d_cycles, sizeof(c), cudaMemcpyDeviceToHost);
  return double(c) / reps;
}

static void timing_table(const uint8_t* d_kv, long long* d_cycles, int reps) {
  float* d_sink;
  cudaMalloc(&d_sink, 256 * sizeof(float));
  std::printf("cycles per rep (S^T of one tile, then O^T of 256 columns over OT tiles), per block:\n");
#define ROW(SM, SG, OM, OT, W, what) \
  std::printf("  S%d sg%d O%d ot%d wgs%d  %8.0f  %s\n", SM, SG, OM, OT, W, time_design<SM, SG, OM, OT, W>(d_kv, d_cycles, d_sink, reps), what)
  ROW(0, 2, 1, 0, 1, "S^T both operands in shared memory (tensor ~1100)");
  ROW(1, 2, 1, 0, 1, "S^T A registers converted once");
  ROW(2, 2, 1, 0, 1, "S^T as the check's scheme");
  ROW(3, 2, 1, 0, 1, "S^T pipelined, groups of 2 k-steps");
  ROW(3, 4, 1, 0, 1, "S^T pipelined, groups of 4");
  ROW(3, 6, 1, 0, 1, "S^T pipelined, groups of 6");
  ROW(0, 2, 1, 0, 2, "S^T shared memory, 2 warpgroups (tensor ~2200)");
  ROW(1, 2, 1, 0, 2, "S^T registers once, 2 warpgroups");
  ROW(3, 4, 1, 0, 2, "S^T pipelined 4, 2 warpgroups");
  ROW(3, 6, 1, 0, 2, "S^T pipelined 6, 2 warpgroups");
  ROW(1, 2, 1, 2, 1, "S^T once + O^T once x 2 tiles (tensor ~2100)");
  ROW(1, 2, 2, 2, 1, "S^T once + O^T check scheme x 2");
  ROW(1, 2, 3, 2, 1, "S^T once + O^T pipelined x 2");
  ROW(3, 4, 3, 2, 1, "design, 1 warpgroup (tensor ~2100)");
  ROW(3, 4, 3, 2, 2, "design, 2 warpgroups = one pair of tiles x 64 rows (tensor ~4200)");
  ROW(3, 6, 3, 2, 2, "design sg6, 2 warpgroups");
  ROW(1, 2, 1, 2, 2, "design's products with registers once, 2 warpgroups");
  // (session 26, NOTES item 47 n: not yet run)
  ROW(4, 2, 1, 0, 1, "S^T of 656-byte rows in bf16 (value x scale per token and group)");
  ROW(4, 2, 1, 0, 2, "S^T of 656-byte rows in bf16, 2 warpgroups");
  ROW(4, 2, 3, 2, 2, "656 design (S^T bf16 scaled, O^T as fp8's), 2 warpgroups");
#undef ROW
  cudaFree(d_sink);
}

static double e4m3_value(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -v : v;
}

// Random f16 values from `dist`: their bits for the device, their values for the reference.
template <typename Dist>
static void random_halves(std::mt19937& gen, Dist dist, std::vector<uint16_t>& bits, std::vector<double>& values) {
  for (size_t i = 0; i < bits.size(); ++i) {
    const __half h = __float2half(dist(gen));
    bits[i] = *reinterpret_cast<const uint16_t*>(&h);
    values[i] = double(__half2float(h));
  }
}

// The largest error of got(n, j) against exact(n, j) over j, relative to row n's largest |exact|,
// worst over the rows n < rows.
template <typename Exact, typename Got>
static double worst_row_error(int rows, int cols, Exact exact, Got got) {
  double worst = 0.0;
  for (int n = 0; n < rows; ++n) {
    double row_max = 0.0, err = 0.0;
    for (int j = 0; j < cols; ++j) {
      const double e = exact(n, j);
      row_max = std::fmax(row_max, std::fabs(e));
      err = std::fmax(err, std::fabs(e - got(n, j)));
    }
    worst = std::fmax(worst, row_max > 0 ? err / row_max : err);
  }
  return worst;
}

#define CHECK(x)                                                                 \
  do {                                                                           \
    cudaError_t err_ = (x);                                                      \
    if (err_ != cudaSuccess) {                                                   \
      std::printf("%s: %s\n", #x, cudaGetErrorString(err_));                     \
      return 2;                                                                  \
    }                                                                            \
  } while (0)

template <int D>
static int run(const uint8_t* d_kv, const uint16_t* d_q, float* d_s, long long* d_cycles, int reps, long long* cycles) {
  CHECK(cudaFuncSetAttribute(probe_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem + 1024));
  probe_kernel<D><<<1, 128, kSmem + 1024>>>(d_kv, d_q, d_s, reps, d_cycles);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(cycles, d_cycles, sizeof(long long), cudaMemcpyDeviceToHost));
  return 0;
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 64;
  std::mt19937 gen(0);
  std::vector<uint8_t> kv(kTokens * kWidth);
  std::vector<uint16_t> qh(kRows * kWidth);
  std::vector<double> qv(kRows * kWidth);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> uni(-2.f, 2.f);
  for (auto& b : kv) {
    do b = uint8_t(byte(gen)); while ((b & 0x7F) == 0x7F);  // no NaN encodings
  }
  random_halves(gen, uni, qh, qv);
  uint8_t* d_kv;
  uint16_t* d_q;
  float* d_s;
  long long* d_cycles;
  CHECK(cudaMalloc(&d_kv, kv.size()));
  CHECK(cudaMalloc(&d_q, qh.size() * 2));
  CHECK(cudaMalloc(&d_s, kTokens * kRows * 4));
  CHECK(cudaMalloc(&d_cycles, sizeof(long long)));
  CHECK(cudaMemcpy(d_kv, kv.data(), kv.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_q, qh.data(), qh.size() * 2, cudaMemcpyHostToDevice));

  long long cycles = 0;
  if (run<2>(d_kv, d_q, d_s, d_cycles, 1, &cycles)) return 2;
  std::vector<float> s(kTokens * kRows);
  CHECK(cudaMemcpy(s.data(), d_s, s.size() * 4, cudaMemcpyDeviceToHost));
  const double worst = worst_row_error(
      kRows, kTokens,
      [&](int n, int t) {
        double exact = 0.0;
        for (int k = 0; k < kWidth; ++k) exact += e4m3_value(kv[t * kWidth + k]) * qv[n * kWidth + k];
        return exact;
      },
      [&](int n, int t) { return double(s[t * kRows + n]); });
  bool pass = worst < 1e-5;
  std::printf("S^T (register A from raw e4m3, f16 products): max error / row's max |S| %.3e  %s\n", worst,
              worst < 1e-5 ? "PASS" : "FAIL");

  // O^T = V^T P^T for latent columns [0, 256).
  std::vector<uint16_t> ph(kRows * kTokens);
  std::vector<double> pv(kRows * kTokens);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  random_halves(gen, unit, ph, pv);
  uint16_t* d_p;
  float* d_o;
  CHECK(cudaMalloc(&d_p, ph.size() * 2));
  CHECK(cudaMalloc(&d_o, 256 * kRows * 4));
  CHECK(cudaMemcpy(d_p, ph.data(), ph.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaFuncSetAttribute(probe_ot_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem + 1024));
  long long c_ot = 0;
  for (int pass_reps : {1, reps}) {
    probe_ot_kernel<false><<<1, 128, kSmem + 1024>>>(d_kv, d_p, d_o, pass_reps, d_cycles);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    if (pass_reps == 1) {
      std::vector<float> o(256 * kRows);
      CHECK(cudaMemcpy(o.data(), d_o, o.size() * 4, cudaMemcpyDeviceToHost));
      const double worst_o = worst_row_error(
          kRows, 256,
          [&](int n, int col) {
            double exact = 0.0;
            for (int t = 0; t < kTokens; ++t) exact += e4m3_value(kv[t * kWidth + col]) * pv[n * kTokens + t];
            return exact;
          },
          [&](int n, int col) { return double(o[col * kRows + n]); });
      pass = pass && worst_o < 1e-5;
      std::printf("O^T (register A = V^T from raw e4m3 via ldmatrix .trans): max error / row's max |O| %.3e  %s\n",
                  worst_o, worst_o < 1e-5 ? "PASS" : "FAIL");
    } else {
      CHECK(cudaMemcpy(&c_ot, d_cycles, sizeof(long long), cudaMemcpyDeviceToHost));
    }
  }
  // NOTES item 48 h: the same products with a per-(token, 128-dim group) f16 scale multiplied in
  // registers (HMUL2 after the conversion); the reference rounds each value x scale to f16 as the
  // multiply does (both factors are f16, so their product is exact in float before the rounding).
  {
    std::vector<uint16_t> sh(kTokens * 4);
    std::vector<double> sv(kTokens * 4);
    std::uniform_real_distribution<float> expo(-6.f, 6.f);
    for (size_t i = 0; i < sh.size(); ++i) {
      const __half h = __float2half(std::exp2(expo(gen)));
      sh[i] = *reinterpret_cast<const uint16_t*>(&h);
      sv[i] = double(__half2float(h));
    }
    auto scaled = [&](int t, int k) {  // value x scale as the kernel's HMUL2 rounds it
      return double(__half2float(__float2half_rn(float(e4m3_value(kv[t * kWidth + k]) * sv[t * 4 + k / 128]))));
    };
    uint16_t* d_sc;
    CHECK(cudaMalloc(&d_sc, sh.size() * 2));
    CHECK(cudaMemcpy(d_sc, sh.data(), sh.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaFuncSetAttribute(probe_kernel<2, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem + 1024));
    probe_kernel<2, true><<<1, 128, kSmem + 1024>>>(d_kv, d_q, d_s, 1, d_cycles, d_sc);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(s.data(), d_s, s.size() * 4, cudaMemcpyDeviceToHost));
    const double worst_ss = worst_row_error(
        kRows, kTokens,
        [&](int n, int t) {
          double exact = 0.0;
          for (int k = 0; k < kWidth; ++k) {
            exact += (k < 512 ? scaled(t, k) : e4m3_value(kv[t * kWidth + k])) * qv[n * kWidth + k];
          }
          return exact;
        },
        [&](int n, int t) { return double(s[t * kRows + n]); });
    CHECK(cudaFuncSetAttribute(probe_ot_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem + 1024));
    probe_ot_kernel<true><<<1, 128, kSmem + 1024>>>(d_kv, d_p, d_o, 1, d_cycles, d_sc);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> o(256 * kRows);
    CHECK(cudaMemcpy(o.data(), d_o, o.size() * 4, cudaMemcpyDeviceToHost));
    const double worst_so = worst_row_error(
        kRows, 256,
        [&](int n, int col) {
          double exact = 0.0;
          for (int t = 0; t < kTokens; ++t) exact += scaled(t, col) * pv[n * kTokens + t];
          return exact;
        },
        [&](int n, int col) { return double(o[col * kRows + n]); });
    pass = pass && worst_ss < 1e-5 && worst_so < 1e-5;
    std::printf("S^T with group scales in registers (656-byte design): max error / row's max |S| %.3e  %s\n",
                worst_ss, worst_ss < 1e-5 ? "PASS" : "FAIL");
    std::printf("O^T with group scales in registers (656-byte design): max error / row's max |O| %.3e  %s\n",
                worst_so, worst_so < 1e-5 ? "PASS" : "FAIL");
    cudaFree(d_sc);
  }
  long long c1, c2, c3, c4;
  if (run<1>(d_kv, d_q, d_s, d_cycles, reps, &c1) || run<2>(d_kv, d_q, d_s, d_cycles, reps, &c2) ||
      run<3>(d_kv, d_q, d_s, d_cycles, reps, &c3) || run<4>(d_kv, d_q, d_s, d_cycles, reps, &c4)) {
    return 2;
  }
  std::printf("S^T cycles per tile (%d tiles): D=1 %.0f  D=2 %.0f  D=3 %.0f  D=4 %.0f  (tensor work alone ~1100)\n",
              reps, double(c1) / reps, double(c2) / reps, double(c3) / reps, double(c4) / reps);
  std::printf("O^T cycles per tile, 256 columns (%d tiles): %.0f  (tensor work alone ~500)\n", reps,
              double(c_ot) / reps);
  timing_table(d_kv, d_cycles, reps);
  return pass ? 0 : 1;
}
