// MLA decode over a per-tensor fp8 cache for sequences of more than 16 query rows (Hq = 32-128; kDs below: any),
// bf16 queries, the combined 576-byte rows in pages of >= 64 tokens (TMA). Built for sm_90a only
// (fp8_wide.cu). On by default where it applies; JAXPAGED_MLA_FP8_WIDE=0 opts out (handler_gpu.cu).
// kDs (mla_ds_wide_kernel): DeepSeek-V3.2's 656-byte rows read with ds_dequant="bfloat16" (dense
// caches and sparse index lists; any number of query rows), see mla_fp8_wide_body.
//
// Why a kernel of its own (NOTES items 42-43, 46 f, 47): the wgmma kernel (kernel.cuh) computes on
// 16-bit tiles in shared memory, so its loader converts each fp8 tile into a 72 KiB 16-bit copy,
// a chain that bounded it at 2.4x the 16-bit cache's time. Here the raw tiles (36 KiB; kDs: 41)
// go from the copy engine to shared memory and stay raw: the compute warps convert the cache's values in their
// own registers, as the register A operand of the transposed products
//   S^T = K Q^T     [64 tokens x 64 rows]  (M = the tile's tokens, K = 576)
//   O^T += V^T P^T  [512 columns x 64 rows] (M = latent columns, K = the tile's tokens)
// on 16-bit tensor cores (m64n64k16 f16, A from registers, B from shared memory): each fp8 value
// is an f16 exactly (one cvt per two values), the queries are f16 times a power of two per row
// (as the converting path's), the products accumulate in float32 - the 16-bit path's accuracy
// (kDs: bf16 tensor cores, each value bf16(value x group scale), queries bf16 as they are; see
// mla_fp8_wide_body). tools/wgmma_rega_probe.cu checked both products against float64 on the H100
// (the f16 ones; kDs's bf16 scaled fragments are checked by the tests) and timed them:
// A from registers runs at the tensor cores' rate, and with two warpgroups the conversion of one
// overlaps the other's products (NOTES item 47).
//
// Operand layouts (the probe's):
// - S^T's A: warp w's 16 tokens by ldmatrix x4 of the raw tile (16 tokens x 32 bytes = two k16
//   steps), one cvt per two values. ldmatrix hands a thread bytes 4c .. 4c + 3 of a 16-byte row
//   (c = lane % 4) where the f16 A layout wants k-positions 2c, 2c + 1, 2c + 8, 2c + 9, so
//   position p of each 16-dim group holds dim 4 ((p % 8) / 2) + 2 (p / 8) + p % 2; Q^T (B, K-major,
//   128-byte swizzle) is stored with its dims in that order (a sum over dims does not care).
// - O^T's A: V^T's fragments from the same raw tile by ldmatrix x4 .trans of byte pairs and two
//   byte_perms: a thread holds latent columns 2g and 2g + 1 (g = lane / 4) of its warp's 16 at the
//   A layout's tokens in natural order, so the accumulator's M rows are columns relabelled (row g
//   of warp w's 16 is column 16 w + 2 g, row g + 8 is column 16 w + 2 g + 1) and P^T (B: 64 rows
//   x 64 tokens of f16, K-major) needs no permutation.
//
// Block = 64 query rows (row block rb of the sequence's s_q x Hq) x one partition of the schedule
// (partition_schedule.cuh), as the wgmma kernel's grid; 384 threads: warpgroups 0 and 1 compute,
// warpgroup 2 loads (one thread: mla_fp8_tma_ring, a ring of three raw buffers; sparse lists of
// 656-byte rows: all 128 threads, mla_ds_gather_ring). The compute
// warpgroups take a sequence's tiles in pairs, in step:
//   warpgroup i: S^T of the pair's tile i (its scores, scaled and masked), and whether any score
//     passes its row's running maximum by more than 2^8 (a vote: one flag per warp);
//   both (named barrier): only if one did (a sequence's first pair, then rarely), the pair's row
//     maxima over the 8 warps (another barrier), each row's new running maximum (the same in
//     every thread that holds the row) and the rescale of O and of the sums - the maxima move
//     lazily, so the probabilities stay <= 2^8 and most pairs skip the exchange; then the
//     probabilities of tile i as P^T (f16, kDs: bf16; shared memory) and this thread's shares
//     of the sums;
//   both (named barrier): O^T += V^T P^T over tile 0, then tile 1, for the warpgroup's 256
//     columns (128 float accumulators a thread), each tile's raw buffer handed back once its
//     products are done (the loader refills tile 0's while tile 1's run; kSparse: as soon as the
//     last of its values are in registers, before the last k-step's product).
// An S^T accumulator and an O^T accumulator hold the same query rows in a thread (columns 8 j +
// 2 c + e of the N = 64 side), so a row's maximum, sum and rescale live in the threads that hold
// its outputs. Tokens past a sequence's end: scores masked by position, their latent bytes (kDs:
// and group scales) zeroed in the raw tile after its S^T (the copy engine brings whole pages, whose
// rows past kv_len may hold anything; sparse lists: such rows and entries that name no key come
// zero-filled, masked by their key bytes). Query rows past the sequence's s_q x Hq are zero and
// never stored. An out-of-range page id makes the sequence's output NaN (its box is zero-filled by
// the engine).
#pragma once

#include <cuda.h>  // CUtensorMap

#include <type_traits>

#include "common/fp8.cuh"  // half2_bits_scaled_to, f16_query_exponent
#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "common/pdl.cuh"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/wgmma.cuh"
#include "mla_decode/params.h"
#include "mla_decode/partition_schedule.cuh"
#include "mla_decode/sm90/epilogue.cuh"  // mla_row_factor, mla_row_output, mla_row_lse
#include "mla_decode/sm90/fp8_ring.cuh"
#include "mla_decode/sm90/trace.cuh"

namespace jaxpaged {

// two compute warpgroups + the loader's (one thread works; kDs sparse lists: all 128 gather)
constexpr int kWideThreads = 384;
// Registers per thread after the loader warpgroup hands its share over (3 x 168 in all): a compute
// thread holds O^T's 128 accumulators, S^T's 32, its shares of its 16 rows' sums, and a few
// k-steps of A fragments (the rows' running maxima are in shared memory).
constexpr int kWideComputeRegs = 232, kWideLoaderRegs = 40;
// kDF (656-byte rows, fp8 math) holds S^T's group partial beside sacc and O^T: 8 more a compute
// thread, the loader's one thread issuing copies with setmaxnreg's least.
constexpr int kWideDfComputeRegs = 240, kWideDfLoaderRegs = 24;
constexpr int kWideStages = 3;  // raw tile buffers: a pair's two, and the next pair's first
// A row's running maximum moves only when a score passes it by more than this (log2 domain): the
// probabilities are then at most 2^8 (f16 and bf16 hold them), and most pairs skip the rescale.
constexpr float kWideRescaleLog2 = 8.f;

// Shared memory, byte offsets from a 1024-aligned base. kDs: 656-byte rows (fp8_ring.cuh's tile).
// kDs && kF8 (kDF, the 656-byte rows' fp8-math mode): Q^T in five blocks (e4m3 latent, bf16 rope),
// four P^T blocks (one per latent group), the pair's maxima of the group scales.
template <bool kDs, bool kF8 = false>
struct MlaWideSmemT {
  static constexpr bool kDF = kDs && kF8;
  static constexpr int kBlock = 64 * 128;  // a column block of 64 rows (query rows or tokens)
  // Q^T: 64 rows x 576 f16 (kDs: bf16), permuted dims (kDs: the rope's natural order); kDF: the
  // e4m3 latent in four blocks, the bf16 rope in the fifth
  static constexpr int kQBlocks = kDF ? 5 : 9;
  static constexpr int kRawStride = kDs ? kMlaDsRawBytes : kMlaRawBytes;
  static constexpr int kQ = 0;
  static constexpr int kRaw = kQ + kQBlocks * kBlock;           // [stage]
  // [tile of the pair]: P^T, 64 rows x 64 tokens f16 (kDs: bf16); kF8: one block, e4m3, tile t at
  // bytes 64 t of a row; kDF: [latent group] such blocks
  static constexpr int kPt = kRaw + kWideStages * kRawStride;
  static constexpr int kMax = kPt + (kDF ? 4 : 2) * kBlock;     // [row][warp] floats: a pair's maxima
  static constexpr int kSum = kMax + 64 * 8 * 4;                // [row][warp] floats: the sums (epilogue)
  static constexpr int kM = kSum + 64 * 8 * 4;                  // [parity][row]: running maxima (log2 domain)
  static constexpr int kFlag = kM + 2 * 64 * 4;                 // [warp]: a score exceeded its row's maximum
  static constexpr int kQk = kFlag + 8 * 4;                     // [row]: the row's score scale
  static constexpr int kGmax = kQk + 64 * 4;                    // kDF: [warp][group] floats
  static constexpr int kBad = kGmax + (kDF ? 8 * 4 * 4 : 0);    // [stage] ints, then [warpgroup]
  static constexpr int kBarriers = kBad + 32;                   // full[2 stages] (kDF: a buffer's halves), empty[stages]
  static constexpr size_t kAllocBytes = size_t(kBarriers) + 3 * kWideStages * 8 + 1024;  // + alignment
  static_assert(kRaw % 1024 == 0 && kPt % 1024 == 0, "swizzle atoms need aligned bases");
  static_assert(kBad + 4 * (kWideStages + 2) <= kBarriers && kBarriers % 8 == 0, "barriers overlap or misalign");
};
using MlaWideSmem = MlaWideSmemT<false>;
static_assert(MlaWideSmem::kAllocBytes <= 227 * 1024, "more shared memory than a Hopper block may have");
static_assert(MlaWideSmemT<true>::kAllocBytes <= 227 * 1024, "more shared memory than a Hopper block may have");
static_assert(MlaWideSmemT<true, true>::kAllocBytes <= 227 * 1024, "more shared memory than a Hopper block may have");
static_assert(2 * kWideComputeRegs + kWideLoaderRegs <= 3 * (65536 / kWideThreads / 8 * 8),
              "register budgets exceed the block's registers");
static_assert(2 * kWideDfComputeRegs + kWideDfLoaderRegs <= 3 * (65536 / kWideThreads / 8 * 8),
              "register budgets exceed the block's registers");

#if defined(JP_HAVE_WGMMA)
constexpr int kWideBarBoth = 1;  // named barrier of both compute warpgroups (0 is __syncthreads)

// x, as a value the compiler cannot see through: what is computed from it is computed where it is
// used (hoisted out of the tile loop, this kernel's per-row addresses spilled).
__device__ __forceinline__ int wide_launder(int x) {
  asm volatile("" : "+r"(x));
  return x;
}
// S^T's A fragments of k-steps 2 kk and 2 kk + 1 from an ldmatrix x4 of the raw tile (raw[0]: token
// g, bytes 4c .. 4c + 3 of the first 16 dims; raw[1]: token g + 8; raw[2], raw[3]: the next 16).
template <bool kE5m2>
__device__ __forceinline__ void wide_k_fragments(uint32_t* set, const uint32_t (&raw)[4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    fp8x4_to_half2x2_bits<kE5m2>(raw[2 * s], set[4 * s + 0], set[4 * s + 2]);
    fp8x4_to_half2x2_bits<kE5m2>(raw[2 * s + 1], set[4 * s + 1], set[4 * s + 3]);
  }
}
// O^T's A fragments of two k-steps (32 tokens) from an ldmatrix x4 .trans of the raw tile (raw[q]:
// tokens 8 q + 2c, + 1 x columns 2g, 2g + 1; a sequence's rows past its end are zeroed in the tile -
// kDs: their scales too; sparse lists: zero-filled by the gather).
template <bool kE5m2>
__device__ __forceinline__ void wide_v_fragments(uint32_t* set, const uint32_t (&raw)[4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const uint32_t even = __byte_perm(raw[2 * s], raw[2 * s + 1], 0x6420);  // column 2g
    const uint32_t odd = __byte_perm(raw[2 * s], raw[2 * s + 1], 0x7531);   // column 2g + 1
    fp8x4_to_half2x2_bits<kE5m2>(even, set[4 * s + 0], set[4 * s + 2]);
    fp8x4_to_half2x2_bits<kE5m2>(odd, set[4 * s + 1], set[4 * s + 3]);
  }
}

// kDF's powers of two: 2^e from its bits, for e within float32's normal exponents (-126 .. 127),
// and for any e (ldexpf past them: a subnormal, 0 or inf).
__device__ __forceinline__ float wide_pow2_normal(int e) { return __int_as_float((e + 127) << 23); }
__device__ __forceinline__ float wide_pow2(int e) {
  return e >= -126 && e <= 127 ? wide_pow2_normal(e) : ldexpf(1.f, e);
}

// kF8 (the fp8-math mode): two values as e4m3, x0 in the low byte (round to nearest even, saturated
// to +-448; NaN stays NaN).
__device__ __forceinline__ uint32_t wide_e4m3x2(float x0, float x1) {
  uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;\n" : "=h"(d) : "f"(x0), "f"(x1));
  return d;
}
// kF8: the larger of each of two bf16 pairs (__hmax2's max.bf16x2: a NaN gives the other operand,
// two give NaN; subnormals compare as they are).
__device__ __forceinline__ uint32_t wide_bf16x2_max(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("max.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
// kF8: O^T's A fragment of one k32 step (32 tokens) from an ldmatrix x4 .trans of the raw tile
// (raw[q]: tokens 8 q + 2c, + 1 x columns 2g, 2g + 1), the cache's bytes as they are: register 0
// column 2g (M row g), register 1 column 2g + 1 (row g + 8), at k-positions 4c .. 4c + 3 (registers
// 2, 3: 16 + 4c ..). k-position 16 h + 4c + i holds token 16 h + 2c + i / 2 + 8 (i % 2), so byte
// 2u + e of each 16-token group of P^T holds token u + 8e (the order its writer stores).
__device__ __forceinline__ void wide_v_fragments_f8(uint32_t* set, const uint32_t (&raw)[4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    set[2 * s] = __byte_perm(raw[2 * s], raw[2 * s + 1], 0x6240);      // column 2g: tokens 2c, 2c+8, 2c+1, 2c+9
    set[2 * s + 1] = __byte_perm(raw[2 * s], raw[2 * s + 1], 0x7351);  // column 2g + 1
  }
}

// kDs: DeepSeek-V3.2's 656-byte rows read with ds_dequant="bfloat16" (NOTES item 49): cache_map
// brings the latent bytes, tail_map each row's four float32 group scales and 64 bf16 rope values.
// The products run on bf16 tensor cores: K's and V's values are converted in registers to the
// bf16 of value x group scale (common/fp8.cuh's half2_bits_scaled_to, the wgmma kernel's loader's
// rounding: the reading's own, so the kernel matches the reference), the rope's bf16 values go in
// as they are, Q^T is the bf16 queries unscaled (k = 0: a power of two would only bring the scores'
// float32 sums nearer overflow, NOTES item 49 g / 50 b) and P^T bf16.
// kSparse (with kDs): sequences are sparse index lists, gathered by the loader warpgroup's 128
// threads (mla_ds_gather_ring: each row as it is, by bulk copies; MlaRawTile<true>'s layout); an
// entry that names no key is masked by its tile's key bytes.
// kF8 (per-tensor fp8 caches; NOTES item 61): the products in fp8 as FlashMLA's fp8 decode computes them -
// Q^T the queries x 2^k per row rounded to e4m3 (k puts the row's largest |q| in (224, 448], the
// narrow kernel's rule), S^T = K Q^T with both operands from shared memory (m64n64k32: the raw tile
// is A as the copy engine left it, no conversion), P^T e4m3 (P <= 2^8 with the lazy maxima), O^T +=
// V^T P^T with the raw bytes as A (m64n64k32: one ldmatrix .trans and two byte_perms per k-step,
// no conversion). Half the tensor cycles of the f16 path; the queries' and probabilities' rounding
// (2^-4 relative) sets its error (FlashMLA's: 3.6-4.0e-2 against the reference in the bench).
// kDF = kDs && kF8 (656-byte rows with fp8_math=True, dense or sparse lists; NOTES items 81, 84): a
// token's group scale s[t][g] (one per 128 latent columns) multiplies its terms inside both
// products' sums, so it cannot be applied to an accumulator of mixed tokens' terms:
//   S^T: per latent group g its four k32 steps (SS, as kF8's; sparse lists' unswizzled rows: A by
//     ldmatrix, RS; queries e4m3 x 2^k) into `part` (the first into sacc), added as sacc +=
//     s[t][g] part (an accumulator row is a token, so a thread's two tokens' scales), then the
//     rope's four bf16 k16 steps (kDs's fragments, queries bf16 x 2^k, exact) into sacc;
//   P^T: one e4m3 block per group, P_g[r][t] = e4m3(p[r][t] x s[t][g] x 2^-E_g), with E_g a power
//     of two that only grows (from the largest scale of each pair's tokens, so that p s 2^-E_g <
//     2^8 under the lazy maxima); O^T's m-blocks of group g take P_g as B, accumulate across tiles
//     as kF8's, are rescaled by 2^(E_old - E_new) when E_g grows, and times 2^E_g at the end.
template <typename T, bool kE5m2, bool kDs = false, bool kSparse = false, bool kF8 = false, bool kH = false>
__device__ __forceinline__ void mla_fp8_wide_body(const MlaDecodeParams& p, int page_shift, int row_blocks,
                                                  const MlaSchedule& s, float* __restrict__ ws_out,
                                                  float* __restrict__ ws_lse, const CUtensorMap* cache_map,
                                                  const CUtensorMap* tail_map = nullptr) {
  using S = MlaWideSmemT<kDs, kF8>;
  using Tile = MlaRawTile<kSparse>;  // (where a token's bytes lie in a raw tile: sparse lists' rows as they are)
  static_assert(!kF8 || (!kH && (kDs || !kSparse)), "the fp8-math mode reads per-tensor fp8 rows or 656-byte rows");
  constexpr bool kDF = kDs && kF8;
  constexpr int kNoExp = -100000;  // kDF: a group's E before its first nonzero scale
  static_assert(!kH || kDs, "the float16 reading is a reading of 656-byte rows");
  // kB: the kDs path's bf16 reading (bf16 products); kH's float16 reading runs f16 products as the
  // per-tensor fp8 path's, the rope's k-steps bf16 as kB's.
  constexpr bool kB = kDs && !kH;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  // kHalves (kDF's dense tiles): two full barriers a buffer, one per half (mla_fp8_tma_ring's
  // kHalves: full[2 stage] latent blocks 0-1 and the tails, full[2 stage + 1] the rest), so that
  // S^T starts on the first half; the other modes, one a buffer (measured, NOTES item 83: the
  // halves cut kDF's time by 2-3% and cost kF8's 1-2%).
  constexpr bool kHalves = kDF && !kSparse;
  constexpr int kFullPer = kHalves ? 2 : 1;
  uint64_t* full = reinterpret_cast<uint64_t*>(base + S::kBarriers);
  uint64_t* empty = full + 2 * kWideStages;
  // A buffer's first half landed (one barrier a buffer: the whole tile), and its second (all of it).
  auto wait_first = [&](int stage, uint32_t ph) { mbar_wait(&full[kFullPer * stage], ph); };
  auto wait_rest = [&](int stage, uint32_t ph) {
    if constexpr (kHalves) mbar_wait(&full[2 * stage + 1], ph);
  };
  int* sBad = reinterpret_cast<int*>(base + S::kBad);
  float* sMax = reinterpret_cast<float*>(base + S::kMax);
  float* sSum = reinterpret_cast<float*>(base + S::kSum);
  float* sM = reinterpret_cast<float*>(base + S::kM);
  int* sFlag = reinterpret_cast<int*>(base + S::kFlag);
  float* sQk = reinterpret_cast<float*>(base + S::kQk);
  float* sGmax = reinterpret_cast<float*>(base + S::kGmax);

  const int tid = threadIdx.x, lane = tid % 32;
  const int warp = gpu::shfl(tid / 32, 0);  // (uniform in the warp, known to be so)
  const int part = blockIdx.x / row_blocks, rb = blockIdx.x % row_blocks;
  const int first_b = max(s.part_first[part], 0), last_b = min(s.part_last[part], int(p.batch) - 1);
  const int rows_per_b = int(p.s_q * p.num_heads);
  const int row0 = rb * 64;
  const int64_t capacity = p.max_pages * p.page_size;

  if (tid == 0) {
    for (int i = 0; i < kWideStages; ++i) {
      for (int h = 0; h < kFullPer; ++h)  // the loader's arrival with the bytes (kSparse: each of its 128 threads')
        mbar_init(&full[kFullPer * i + h], kSparse ? 128 : 1);
      mbar_init(&empty[i], 8);  // each warp of both compute warpgroups
    }
    fence_proxy_async_shared();
  }
  __syncthreads();

  if (warp >= 8) {  // the loader warpgroup: one thread issues the copies (kSparse: all 128 gather)
    warpgroup_regs_shrink<kDF ? kWideDfLoaderRegs : kWideLoaderRegs>();
    if constexpr (kSparse) {
      static_assert(kDs, "sparse lists: 656-byte rows only");
      mla_ds_gather_ring<kWideStages>(p, s, part, first_b, last_b, capacity, base + S::kRaw, full, empty,
                                      sBad, tid - 256);
    } else if (warp == 8 && lane == 0) {
      mla_fp8_tma_ring<kWideStages, kFullPer * kWideStages, kDs, kHalves>(
          p, page_shift, s, part, first_b, last_b, capacity, cache_map, base + S::kRaw, full, empty, sBad, tail_map);
    }
    return;
  }

  // The compute warpgroups.
  warpgroup_regs_grow<kDF ? kWideDfComputeRegs : kWideComputeRegs>();
  const int wg = warp / 4, ww = warp % 4;
  const int tw = tid % 128;
  // The timeline probe's marks (trace.cuh; nothing outside tools/mla_trace.cu's build): ids 60-82,
  // the same in both warpgroups (role = wg); the loader's 90-95 (fp8_ring.cuh's mla_fp8_tma_ring).
  MlaTrace tr(p, wg);
  tr(60);
  const uint32_t sbase = smem_addr(base);
  const float kv_scale = kDs ? 1.f : mla_kv_scale(p);
  // (fp8: the values are the fp8 values x kv_scale; kDs: 1, the group scales applied in registers)
  const float qk_base = mla_scale(p) * kLog2e * kv_scale;
  const T* q_nope = static_cast<const T*>(p.q_nope);
  const T* q_pe = static_cast<const T*>(p.q_pe);
  // This thread's rows (N of both products): row(k) = 8 (k / 2) + 2c + k % 2, k < 16 (c = lane % 4);
  // in S^T's accumulators, token 16 ww + g at [4 (k / 2) + k % 2] and token + 8 at [4 (k / 2) + 2 +
  // k % 2] (g = lane / 4). (Each phase below takes g and c from a laundered lane: wide_launder.)
  auto row_of = [](int k, int c) { return 8 * (k / 2) + 2 * c + (k % 2); };
  const uint64_t q_desc0 = wgmma_desc_sw128(sbase + S::kQ, 16, 1024);
  // kDs: raw buffer `stage`'s group scales (float32, the first four of each token's tail), kRow
  // floats from a token's to the next's.
  constexpr int kRow = Tile::kTailStride / 4;
  auto tile_scales = [&](int stage) {
    return reinterpret_cast<const float*>(base + S::kRaw + stage * S::kRawStride + Tile::tail(0));
  };

  int use = 0;  // tiles of this block so far (the raw ring's position, as the loader counts)
  for (int b = first_b; b <= last_b; ++b) {
    const int kv_len = kSparse ? mla_kv_len<true>(p, b, capacity) : int(clamp_kv_len(p.kv_lens[b], capacity));
    const TileSpan tiles = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
    tr(61);

    // The sequence's queries as Q^T: f16 x 2^k per row (k puts the row's largest finite |q| in
    // [2^14, 2^15), as the converting path's convert_queries; a zero or non-finite row keeps k = 0;
    // kDs: bf16, k = 0), dims permuted (kDs: the rope's in natural order). Four threads a row, 18
    // chunks of 8 values each, copied raw into Q^T's place; the maximum first, then the conversion
    // in place. Both warpgroups are done with the previous sequence's S^T and rows.
    named_barrier_sync(kWideBarBoth, 256);
    if constexpr (kF8) {
      // kF8: Q^T in e4m3, dims in their natural order (the raw tile's: dim d of row r at block d /
      // 128, byte d % 128 of the row), five column blocks (the fifth's first 64 bytes: the rope;
      // kDF: the fifth holds the rope in bf16). Four threads a row, 18 chunks of 8 values each.
      // Rolled loops over the chunks staged in shared memory: this code runs once a sequence from a
      // cold instruction cache, where its size is its time (unrolled from registers it took 11-13k
      // cycles a block, ~18 KB of code). Row r's 1152 raw bytes go to its 128-byte lines of nine
      // column blocks - Q^T's nine (kF8), or Q^T's first four, P^T's four (free until the sequence's
      // first pair) and Q^T's fifth (kDF: the rope's raw chunks where its bf16 goes) - chunk ch in
      // line ch / 8 at 16-byte unit ch % 8, swizzled as Q^T. The e4m3 of chunks 4i .. 4i + 3 (loop
      // step i) lands on raw chunks 2i and 2i + 1, read by then (step i / 2; a row is one warp's).
      const int lt = wide_launder(tid);  // (this section's addresses are computed here, not kept in registers)
      const int r = lt / 4, sub = lt % 4;
      const bool live = row0 + r < rows_per_b;
      const int64_t gq = int64_t(b) * rows_per_b + (live ? row0 + r : 0);
      // Step i's raw chunk (sub + 4i: line i / 2, unit sub + 4 (i % 2)) and its e4m3's 8 bytes (block
      // i / 4, unit 2 (i % 4) + sub / 2, byte 8 (sub % 2)): sw128_offset's XOR, taken apart.
      unsigned char* const row_q = base + S::kQ + 128 * r;
      const uint32_t raw_unit = 16u * (uint32_t(sub) ^ uint32_t(r % 8));
      const uint32_t out_unit = (16u * (uint32_t(sub / 2) ^ uint32_t(r % 8))) | (8u * uint32_t(sub % 2));
      auto raw_at = [&](uint32_t i) -> unsigned char* {
        const uint32_t line = i / 2;
        const int shift = !kDF || line < 4 ? 0 : line < 8 ? S::kPt - S::kQ - 4 * S::kBlock : -4 * S::kBlock;
        return row_q + line * S::kBlock + shift + (raw_unit ^ (64u * (i % 2)));
      };
      auto out_at = [&](uint32_t i) { return row_q + (i / 4) * S::kBlock + (out_unit ^ (32u * (i % 4))); };
      // All 18 chunks by cp.async at once, zeros for rows past the sequence's (one round of global
      // latency; a rolled loop, as the 16-bit path's).
      const T* src = q_nope + gq * kMlaLatentDim + 8 * sub;
#pragma unroll 1
      for (uint32_t i = 0; i < 18; ++i, src += 32) {
        if (i == 16) src = q_pe + gq * kMlaRopeDim + 8 * sub;
        cp_async_16(raw_at(i), src, live);
      }
      cp_async_commit();
      cp_async_wait<0>();  // (this thread's own chunks: it alone reads them back before the loop below)
      // The row's largest |value| over bf16 pairs: sign bits cleared, max.bf16x2 (as fmaxf, a NaN
      // gives the other operand; the 0 start keeps NaN out), then the larger of the two as a float -
      // the same float as the maximum over the values converted one by one.
      uint32_t m2 = 0;
#pragma unroll 1
      for (uint32_t i = 0; i < 18; ++i) {
        const uint4 v = *reinterpret_cast<const uint4*>(raw_at(i));
        m2 = wide_bf16x2_max(m2, v.x & 0x7FFF7FFFu);
        m2 = wide_bf16x2_max(m2, v.y & 0x7FFF7FFFu);
        m2 = wide_bf16x2_max(m2, v.z & 0x7FFF7FFFu);
        m2 = wide_bf16x2_max(m2, v.w & 0x7FFF7FFFu);
      }
      const float2 m = bf16x2_to_float2(m2);
      float mx = fmaxf(m.x, m.y);
      mx = fmaxf(mx, gpu::shfl_xor(mx, 1));
      mx = fmaxf(mx, gpu::shfl_xor(mx, 2));
      // k = e4m3_query_exponent(mx) (the row's largest |value| into (224, 448]; 0 for a zero or
      // infinite row) in integer steps: a finite mx > 0 of biased exponent E >= 9 times 2^(135 - E)
      // lies in [256, 512), past 448 iff its fraction is past 0.75; E <= 8 takes the cap, 126
      // (mx 2^126 < 2^E <= 256). So k is in [-120, 126], and exp2_of(k), exp2_of(-k) are ldexpf's.
      int k = 0;
      if (mx > 0.f && mx != INFINITY) {
        const uint32_t bits = __float_as_uint(mx);
        const int e = int(bits >> 23);
        k = e <= 8 ? 126 : 135 - e - int((bits & 0x7FFFFFu) > 0x600000u);
      }
      const float f = exp2_of(k);
      if (sub == 0) {
        sQk[r] = qk_base * exp2_of(-k);
        sM[r] = -INFINITY;  // (parity 0: the sequence's first pair reads it)
      }
      // e4m3 has no infinity: an infinite value becomes NaN, as its scores would. Only a row whose
      // maximum is inf holds one (mx is fmaxf's; the other rows' x f stay within 448), so the check
      // runs only in a warp holding such a row (a branch, rarely taken, where it cost 2 instructions
      // a value).
      const bool any_inf = gpu::any(mx == INFINITY);
#pragma unroll 1
      for (uint32_t i = 0; i < 18; ++i) {
        unsigned char* at = raw_at(i);
        const uint4 v = *reinterpret_cast<const uint4*>(at);
        const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
        __syncwarp();  // (the row's four threads have read this step's raw chunks, which its e4m3 may cover)
        if (kDF && i >= 16) {  // kDF: the rope bf16 x 2^k (exact), natural order, in place in the fifth block
          uint32_t h[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float2 x = bf16x2_to_float2(w4[q]);
            h[q] = pack2<gpu_bf16>(x.x * f, x.y * f);
          }
          *reinterpret_cast<uint4*>(at) = make_uint4(h[0], h[1], h[2], h[3]);
          continue;
        }
        uint32_t packed[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float x[4];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float2 y = bf16x2_to_float2(w4[2 * h + e]);
            x[2 * e] = y.x * f;
            x[2 * e + 1] = y.y * f;
          }
          if (any_inf) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              if (fabsf(x[e]) == INFINITY) x[e] = __int_as_float(0x7FFFFFFF);
            }
          }
          packed[h] = wide_e4m3x2(x[0], x[1]) | (wide_e4m3x2(x[2], x[3]) << 16);
        }
        *reinterpret_cast<uint2*>(out_at(i)) = make_uint2(packed[0], packed[1]);
      }
    } else {
      const int r = tid / 4, sub = tid % 4;
      const bool live = row0 + r < rows_per_b;
      const int64_t gq = int64_t(b) * rows_per_b + (live ? row0 + r : 0);
      // Where chunk ch of row r lands in Q^T: first its raw 16 bytes, then its converted values.
      // The kDs rope's chunks keep their own 16 bytes; every other chunk's 8 values spread over the
      // two 16-byte units of its 16-dim group (dim pair q of half hf = ch % 2 to word 4 (q % 2) +
      // 2 hf + q / 2 of the group's 8 words), which it shares with chunk ch ^ 1 - the lane beside.
      auto unit = [&](int ch) -> unsigned char* {
        if (kDs && ch >= 64) return base + S::kQ + 8 * S::kBlock + sw128_offset(r, ch - 64);
        const int grp = ch / 2;
        return base + S::kQ + (grp / 4) * S::kBlock + sw128_offset(r, (grp % 4) * 2 + ch % 2);
      };
      // All 18 raw chunks by cp.async at once (zeros for rows past the sequence's): one round of
      // global latency where two passes of loads took six (NOTES item 50 c). (A rolled loop: the
      // copies do not wait, and unrolled its 18 addresses stay live into the passes below.)
#pragma unroll 1
      for (int i = 0; i < 18; ++i) {
        const int ch = sub + 4 * i;
        const T* src = ch < 64 ? q_nope + gq * kMlaLatentDim + ch * 8 : q_pe + gq * kMlaRopeDim + (ch - 64) * 8;
        cp_async_16(unit(ch), src, live);
      }
      cp_async_commit();
      cp_async_wait<0>();  // (this thread's own chunks: it alone reads them back)
      int k = 0;
      if constexpr (!kB) {  // (kB: bf16 holds the queries as they are, k = 0 - a power of two there
                            // would only bring the scores' float32 sums nearer their overflow; kH:
                            // k from all 18 chunks, the rope's too - it stays bf16, x 2^k exactly -
                            // so no element of Q^T passes 2^15 and a rope score overflows only for
                            // rope keys past ~1.6e32)
        float mx = 0.f;
#pragma unroll 6
        for (int i = 0; i < 18; ++i) {
          const uint4 v = *reinterpret_cast<const uint4*>(unit(sub + 4 * i));
          const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int kq = 0; kq < 4; ++kq) {  // (fmaxf drops NaN)
            const float2 x = bf16x2_to_float2(w4[kq]);
            mx = fmaxf(mx, fmaxf(fabsf(x.x), fabsf(x.y)));
          }
        }
        mx = fmaxf(mx, gpu::shfl_xor(mx, 1));
        mx = fmaxf(mx, gpu::shfl_xor(mx, 2));
        if (mx > 0.f && mx != INFINITY) k = f16_query_exponent(int((__float_as_uint(mx) >> 23) & 0xFFu));
      }
      const float f = exp2_of(k);
      if (sub == 0) {
        sQk[r] = qk_base * exp2_of(-k);
        sM[r] = -INFINITY;  // (parity 0: the sequence's first pair reads it)
      }
#pragma unroll 6
      for (int i = 0; i < 18; ++i) {
        const int ch = sub + 4 * i;
        unsigned char* at = unit(ch);
        const uint4 v = *reinterpret_cast<const uint4*>(at);
        const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
        __syncwarp();  // (the lane beside has read its raw chunk of the same two units: ch ^ 1 = its chunk
                       // this iteration; the branch below is warp-uniform, i >= 16)
        uint32_t h[4];
        if (kDs && ch >= 64) {  // kDs: the rope in bf16, dims in their natural order (the
                                // cache's bf16 rope comes as A fragments by plain ldmatrix)
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const float2 x = bf16x2_to_float2(w4[q]);
            h[q] = pack2<gpu_bf16>(x.x * f, x.y * f);
          }
          *reinterpret_cast<uint4*>(at) = make_uint4(h[0], h[1], h[2], h[3]);
          continue;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float2 x = bf16x2_to_float2(w4[q]);
          h[q] = kB ? pack2<gpu_bf16>(x.x * f, x.y * f) : pack2<gpu_half>(x.x * f, x.y * f);
        }
        // Dim pair q of the half goes to word 4 (q % 2) + 2 hf + q / 2 of the group's 8 words.
        const int grp = ch / 2, hf = ch % 2;
        const int byte0 = (grp % 4) * 32 + 8 * hf;  // words 2 hf, 2 hf + 1 (and + 16 bytes: 4 + ...)
        unsigned char* blk = base + S::kQ + (grp / 4) * S::kBlock;
        *reinterpret_cast<uint2*>(blk + sw128_offset(r, byte0 / 16) + byte0 % 16) = make_uint2(h[0], h[2]);
        *reinterpret_cast<uint2*>(blk + sw128_offset(r, (byte0 + 16) / 16) + (byte0 + 16) % 16) =
            make_uint2(h[1], h[3]);
      }
    }
    fence_proxy_async_shared();  // Q^T, for the products' async-proxy reads
    named_barrier_sync(kWideBarBoth, 256);
    tr(62);

    float o[4][32];  // O^T of this warpgroup's columns 256 wg + 64 mb + (16 ww + 2g, + 1) x this thread's rows
#pragma unroll
    for (int mb = 0; mb < 4; ++mb)
#pragma unroll
      for (int i = 0; i < 32; ++i) o[mb][i] = 0.f;
    // The rows' running maxima live in shared memory (sM[parity]: registers are O's), this thread's
    // shares of their sums in l.
    float l[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) l[k] = 0.f;
    int parity = 0;
    bool bad = false;
    int ex_g[4] = {kNoExp, kNoExp, kNoExp, kNoExp};  // kDF: E_g (uniform in the block)
    // Causal rows see fewer keys; the block's first row sees the fewest.
    const int first_row_end =
        p.causal ? int(visible_keys(kv_len, p.s_q, min(row0, rows_per_b - 1) / int(p.num_heads), 0).end) : kv_len;
    auto row_end = [&](int n) -> int {
      if (!p.causal || row0 + n >= rows_per_b) return kv_len;
      return int(visible_keys(kv_len, p.s_q, (row0 + n) / int(p.num_heads), 0).end);
    };

    for (int u = tiles.begin; u < tiles.end; u += 2, use += 2) {
      tr(63);
      const bool has1 = u + 1 < tiles.end;
      // The pair's buffers and their full barriers' phases (scalars: an array indexed by the tile
      // loop's counter would live in memory).
      const int st0 = use % kWideStages, st1 = (use + 1) % kWideStages;
      const uint32_t ph0 = uint32_t(use / kWideStages) & 1u, ph1 = uint32_t((use + 1) / kWideStages) & 1u;
      const int mine = u + wg;  // this warpgroup's tile for S^T
      const bool own = wg == 0 || has1;
      float sacc[32];
      if (own) {
        const int stage = wg ? st1 : st0;
        const uint32_t ph = wg ? ph1 : ph0;
        wait_first(stage, ph);
        tr(64);
        bad |= sBad[stage] != 0;
        if constexpr (kDF) {
          // kDF: latent groups 0 and 1 (four e4m3 k32 steps each, SS as kF8's) into sacc and part,
          // then sacc = s0 sacc + s1 part with this thread's tokens' group scales (tokens 16 ww + g
          // and + 8: accumulators j % 4 < 2 and the rest); groups 2 and 3 into part in turn, each
          // added so; last the rope's bf16 k16 steps into sacc (A by ldmatrix from the tails).
          // (part is dead by then: the rope's fragments never live beside it.)
          const uint32_t raw = sbase + S::kRaw + stage * S::kRawStride;
          const uint64_t k_desc0 = wgmma_desc_sw128(raw, 16, 1024);
          const int ls = wide_launder(lane);
          const float* tsc = tile_scales(stage);
          const int t_lo = 16 * ww + ls / 4;
          // kSparse (the rows as they are, unswizzled: no shared-memory descriptor reads them): A
          // by ldmatrix x4, whose four registers are the e4m3 A fragment as they come (token g
          // and g + 8 x bytes 4c .. 4c + 3, then the same 16 bytes on) - k32 step k's in set k % 3,
          // loaded a step ahead, each step committed alone (its set is free once the step two
          // before it is done: wgmma_wait<1>).
          uint32_t ka[3][4];
          auto k_step_load = [&](int k) {  // (this lane's row: the rope's ldmatrix's below)
            ldmatrix_x4(ka[k % 3], raw + Tile::latent(16 * ww + ls % 8 + 8 * ((ls / 8) % 2), 32 * k + 16 * (ls / 16)));
          };
          auto group_steps = [&](float(&acc)[32], int grp) {
#pragma unroll
            for (int st = 0; st < 4; ++st) {
              if constexpr (kSparse) {
                const int k = 4 * grp + st;
                wgmma_wait<1>();
                if (k + 1 < 16) k_step_load(k + 1);
                wgmma_fence();
                wgmma_m64n64k32_rs_f8<false>(acc, ka[k % 3], wgmma_desc_advance(q_desc0, grp * S::kBlock + 32 * st),
                                             st > 0);
                wgmma_commit();
              } else {
                wgmma_m64n64k32_ss_f8<false>(acc, wgmma_desc_advance(k_desc0, grp * kMlaRawBlock + 32 * st),
                                             wgmma_desc_advance(q_desc0, grp * S::kBlock + 32 * st), st > 0);
              }
            }
          };
          float part[32];
          if constexpr (kSparse) k_step_load(0);
          wgmma_fence();
          group_steps(sacc, 0);
          group_steps(part, 1);
          wgmma_commit();
#pragma unroll
          for (int grp = 1; grp < 4; ++grp) {
            if (grp == 2) wait_rest(stage, ph);  // (latent blocks 2-3)
            if (grp > 1) {
              wgmma_fence();
              group_steps(part, grp);
              wgmma_commit();
            }
            wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < 32; ++i) {
              reg_fence(part[i]);
              reg_fence(sacc[i]);
            }
            const float s_lo = tsc[t_lo * kRow + grp], s_hi = tsc[(t_lo + 8) * kRow + grp];
            if (grp == 1) {
              const float z_lo = tsc[t_lo * kRow], z_hi = tsc[(t_lo + 8) * kRow];
#pragma unroll
              for (int i = 0; i < 32; ++i) sacc[i] *= i % 4 < 2 ? z_lo : z_hi;
            }
#pragma unroll
            for (int i = 0; i < 32; ++i) sacc[i] = fmaf(part[i], i % 4 < 2 ? s_lo : s_hi, sacc[i]);
            tr(82 + grp);  // (the probe's 83-85: groups 0-1, 2, 3 added)
          }
          const int st_tok = 16 * ww + ls % 8 + 8 * ((ls / 8) % 2), st_half = ls / 16;
          uint32_t a[4][4];
#pragma unroll
          for (int r = 0; r < 4; ++r) ldmatrix_x4(a[r], raw + Tile::tail(st_tok) + 16 + 32 * r + 16 * st_half);
          wgmma_fence();
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            wgmma_m64n64k16_rs_bf16(sacc, a[r], wgmma_desc_advance(q_desc0, 4 * S::kBlock + 32 * r), 1);
          }
          wgmma_commit();
        } else if constexpr (kF8) {
          // kF8: S^T = K Q^T in 18 k32 steps, both operands from shared memory (A: the raw tile's 64
          // tokens, 128-byte swizzled column blocks as the copy engine wrote them).
          const uint64_t k_desc0 = wgmma_desc_sw128(sbase + S::kRaw + stage * S::kRawStride, 16, 1024);
          wgmma_fence();
#pragma unroll
          for (int step = 0; step < 18; ++step) {
            const uint32_t at = (step / 4) * kMlaRawBlock + 32 * (step % 4);
            const uint32_t qt = (step / 4) * S::kBlock + 32 * (step % 4);
            wgmma_m64n64k32_ss_f8<kE5m2>(sacc, wgmma_desc_advance(k_desc0, at), wgmma_desc_advance(q_desc0, qt),
                                         step > 0);
          }
          wgmma_commit();
        } else {
          // S^T = K Q^T: 18 groups (kDs: 16, then the rope's four bf16 k-steps) of two k-steps, each
          // group's ldmatrix issued before the previous group's products and converted after them
          // (two sets of A registers).
          const uint32_t raw = sbase + S::kRaw + stage * S::kRawStride;
          // This lane's ldmatrix row: token 16 ww + lane % 8 + 8 ((lane / 8) % 2), bytes 16 (lane / 16).
          const int ls = wide_launder(lane);
          const int st_tok = 16 * ww + ls % 8 + 8 * ((ls / 8) % 2), st_half = ls / 16;
          auto st_addr = [&](int kk) {  // dims 32 kk + 16 st_half of this lane's token
            return raw + Tile::latent(st_tok, 32 * kk + 16 * st_half);
          };
          uint32_t rr[4], a[2][8];
          const float* tsc = tile_scales(stage);  // kDs
          constexpr int kGroups = kDs ? 16 : 18;  // (kDs: the rope's four bf16 k-steps after)
          float s_lo = 0.f, s_hi = 0.f;           // kDs: the group's scales of this thread's tokens
          uint32_t h_lo = 0, h_hi = 0;            // kH: those scales as f16 pairs
          ldmatrix_x4(rr, st_addr(0));
#pragma unroll
          for (int kk = 0; kk < kGroups; ++kk) {
            wgmma_wait<1>();  // the group that last read set kk % 2 is done
            wide_k_fragments<kE5m2>(a[kk % 2], rr);
            if (kk + 1 < kGroups) ldmatrix_x4(rr, st_addr(kk + 1));
            if constexpr (kDs) {  // an A register holds two dims of one token (g or g + 8)
              if (kk % 4 == 0) {
                const int t_lo = 16 * ww + wide_launder(lane) / 4, grp = kk / 4;
                s_lo = tsc[t_lo * kRow + grp];
                s_hi = tsc[(t_lo + 8) * kRow + grp];
                if constexpr (kH) h_lo = pack2<gpu_half>(s_lo, s_lo), h_hi = pack2<gpu_half>(s_hi, s_hi);
              }
#pragma unroll
              for (int i = 0; i < 8; ++i) {
                if constexpr (kH) {  // f16(value x f16(scale)): one multiply a pair
                  a[kk % 2][i] = f16x2_mul(a[kk % 2][i], i % 2 ? h_hi : h_lo);
                } else {
                  const float sc = i % 2 ? s_hi : s_lo;
                  a[kk % 2][i] = half2_bits_scaled_to<gpu_bf16>(a[kk % 2][i], sc, sc);
                }
              }
            }
            wgmma_fence();
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int step = 2 * kk + h;  // Q^T bytes 32 step of each row
              const uint64_t qd = wgmma_desc_advance(q_desc0, (step / 4) * S::kBlock + 32 * (step % 4));
              if constexpr (kB) wgmma_m64n64k16_rs_bf16(sacc, a[kk % 2] + 4 * h, qd, step > 0);
              else wgmma_m64n64k16_rs_f16(sacc, a[kk % 2] + 4 * h, qd, step > 0);
            }
            wgmma_commit();
          }
          if constexpr (kDs) {
            // The rope: bf16 in the tails (from byte 16), plain ldmatrix x4 per k-step (rows g,
            // g + 8 x dims 0-7, 8-15: the A layout as it is), against Q^T's bf16 rope.
#pragma unroll
            for (int r = 0; r < 4; ++r) {
              wgmma_wait<1>();
              ldmatrix_x4(a[r % 2], raw + Tile::tail(st_tok) + 16 + 32 * r + 16 * st_half);
              wgmma_fence();
              const int step = 32 + r;
              wgmma_m64n64k16_rs_bf16(sacc, a[r % 2], wgmma_desc_advance(q_desc0, (step / 4) * S::kBlock + 32 * (step % 4)),
                                      1);
              wgmma_commit();
            }
          }
        }
        tr(65);
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < 32; ++i) reg_fence(sacc[i]);
        tr(66);
      }
      // The scores (log2 domain), masked, and whether any exceeds its row's running maximum by more
      // than kWideRescaleLog2 (the maxima move lazily: P = exp2(s - m) stays <= 2^8 otherwise,
      // and O and the sums keep their scale - most pairs after a sequence's first skip the
      // maxima's exchange and the rescale).
      int g = wide_launder(lane) / 4, c = wide_launder(lane) % 4;
      const int t_lo = mine * kMlaTileKeys + 16 * ww + g, t_hi = t_lo + 8;
      const bool mask = kSparse || (mine + 1) * kMlaTileKeys > first_row_end;
      // (kSparse: this thread's two tokens' key bytes, written by the loader with the tile)
      const unsigned char* keymask =
          base + S::kRaw + (wg ? st1 : st0) * S::kRawStride + (kSparse ? kMlaDsKeyMaskAt : 0);
      // (each condition tested once around an unrolled loop: tested per row, the branches and the
      // masked rows' divisions were a large part of this phase's instructions)
      bool exceed = false;
      auto score_rows = [&](auto masked) {
#pragma unroll
        for (int k = 0; k < 16; ++k) {
          const int n = row_of(k, c), j = 4 * (k / 2) + k % 2;
          const float qk = sQk[n];
          if constexpr (decltype(masked)::value && kSparse) {
            sacc[j] = keymask[16 * ww + g] ? sacc[j] * qk : -INFINITY;
            sacc[j + 2] = keymask[16 * ww + g + 8] ? sacc[j + 2] * qk : -INFINITY;
          } else if constexpr (decltype(masked)::value) {
            const int end = row_end(n);
            sacc[j] = t_lo < end ? sacc[j] * qk : -INFINITY;
            sacc[j + 2] = t_hi < end ? sacc[j + 2] * qk : -INFINITY;
          } else {  // (every token of the tile is before every row's end)
            sacc[j] *= qk;
            sacc[j + 2] *= qk;
          }
          exceed |= fmaxf(sacc[j], sacc[j + 2]) > sM[parity * 64 + n] + kWideRescaleLog2;
        }
      };
      if (own) {
        if (mask) score_rows(std::true_type{});
        else score_rows(std::false_type{});
      }
      // kDF: this thread's two tokens' group scales (0 past the sequence's end, whose rows hold
      // anything: their probabilities are 0 and their factors must be too).
      auto token_scales = [&](float4& lo, float4& hi) {
        const int t = 16 * ww + wide_launder(lane) / 4, valid = kv_len - mine * kMlaTileKeys;
        const float* tsc = tile_scales(wg ? st1 : st0);
        lo = t < valid ? *reinterpret_cast<const float4*>(tsc + t * kRow) : make_float4(0.f, 0.f, 0.f, 0.f);
        hi = t + 8 < valid ? *reinterpret_cast<const float4*>(tsc + (t + 8) * kRow) : make_float4(0.f, 0.f, 0.f, 0.f);
      };
      if constexpr (kDF) {  // the warp's largest |scale| of each group over its 16 tokens (fmaxf drops NaN)
        float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
        if (own) token_scales(lo, hi);
        float m4[4] = {fmaxf(fabsf(lo.x), fabsf(hi.x)), fmaxf(fabsf(lo.y), fabsf(hi.y)),
                       fmaxf(fabsf(lo.z), fabsf(hi.z)), fmaxf(fabsf(lo.w), fabsf(hi.w))};
#pragma unroll
        for (int G = 0; G < 4; ++G)
#pragma unroll
          for (int off = 4; off <= 16; off *= 2) m4[G] = fmaxf(m4[G], gpu::shfl_xor(m4[G], off));
        if (lane == 0) *reinterpret_cast<float4*>(sGmax + 4 * warp) = make_float4(m4[0], m4[1], m4[2], m4[3]);
      }
      exceed = gpu::any(exceed);
      if (lane == 0) sFlag[warp] = exceed ? 1 : 0;
      named_barrier_sync(kWideBarBoth, 256);
      tr(67);
      {
        const int4 f0 = *reinterpret_cast<const int4*>(sFlag), f1 = *reinterpret_cast<const int4*>(sFlag + 4);
        exceed = (f0.x | f0.y | f0.z | f0.w | f1.x | f1.y | f1.z | f1.w) != 0;  // (the same in every thread)
      }
      if constexpr (kDF) {
        // The pair's largest scale of each group; E_g grows to the exponent that puts it below 1
        // (frexp: pm < 2^E), and this warpgroup's O^T m-blocks of group g are rescaled to match
        // (before the group's first nonzero scale O is zero: no rescale).
        float pm[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int w = 0; w < 8; ++w) {
          const float4 x = *reinterpret_cast<const float4*>(sGmax + 4 * w);
          pm[0] = fmaxf(pm[0], x.x);
          pm[1] = fmaxf(pm[1], x.y);
          pm[2] = fmaxf(pm[2], x.z);
          pm[3] = fmaxf(pm[3], x.w);
        }
        // (the four exponents at once, a normal pm's from its bits - frexp only for a subnormal
        // one -, then one test: after a sequence's first pairs E_g seldom grows)
        int ex[4];
        bool tiny = false, grows = false;
#pragma unroll
        for (int G = 0; G < 4; ++G) {
          const float x = fminf(pm[G], 3.0e38f);
          ex[G] = x >= 1.17549435e-38f ? (__float_as_int(x) >> 23) - 126 : kNoExp;
          tiny |= pm[G] > 0.f && ex[G] == kNoExp;
        }
        if (tiny) {
#pragma unroll
          for (int G = 0; G < 4; ++G)
            if (pm[G] > 0.f && ex[G] == kNoExp) frexpf(pm[G], &ex[G]);
        }
#pragma unroll
        for (int G = 0; G < 4; ++G) grows |= ex[G] > ex_g[G];
        if (grows) {
#pragma unroll
          for (int G = 0; G < 4; ++G) {
            if (ex[G] > ex_g[G]) {
              if (ex_g[G] != kNoExp && G / 2 == wg) {
                const float down = wide_pow2(ex_g[G] - ex[G]);
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                  for (int i = 0; i < 32; ++i) o[2 * (G % 2) + h][i] *= down;
              }
              ex_g[G] = ex[G];
            }
          }
        }
      }
      if (exceed) {
        // The pair's maxima of the rows over the 8 warps; each row's new running maximum (the same
        // in every thread that holds the row; warp 0's lanes g = 0, all 64 rows between them, write
        // it to the other buffer); O and this thread's sums rescaled.
#pragma unroll
        for (int k = 0; k < 16; ++k) {
          const int n = row_of(k, c), j = 4 * (k / 2) + k % 2;
          float tm = own ? fmaxf(sacc[j], sacc[j + 2]) : -INFINITY;
#pragma unroll
          for (int off = 4; off <= 16; off *= 2) tm = fmaxf(tm, gpu::shfl_xor(tm, off));
          if (g == 0) sMax[n * 8 + warp] = tm;
        }
        named_barrier_sync(kWideBarBoth, 256);
        g = wide_launder(lane) / 4;
        c = wide_launder(lane) % 4;
#pragma unroll
        for (int k = 0; k < 16; ++k) {
          const int n = row_of(k, c), j = 4 * (k / 2) + k % 2;
          const float4 x0 = *reinterpret_cast<const float4*>(sMax + n * 8);
          const float4 x1 = *reinterpret_cast<const float4*>(sMax + n * 8 + 4);
          const float pm = fmaxf(fmaxf(fmaxf(x0.x, x0.y), fmaxf(x0.z, x0.w)), fmaxf(fmaxf(x1.x, x1.y), fmaxf(x1.z, x1.w)));
          const float m = sM[parity * 64 + n];
          const float m_new = fmaxf(m, pm);
          const float corr = m_new == -INFINITY ? 1.f : fast_exp2(m - m_new);
          if (warp == 0 && g == 0) sM[(parity ^ 1) * 64 + n] = m_new;
          if (corr != 1.f) {
            l[k] *= corr;
#pragma unroll
            for (int mb = 0; mb < 4; ++mb) {
              o[mb][j] *= corr;
              o[mb][j + 2] *= corr;
            }
          }
        }
        parity ^= 1;
        named_barrier_sync(kWideBarBoth, 256);  // (the new maxima, for every thread's P below)
        tr(68);
      }
      // P^T of this warpgroup's tile (f16; kDs: bf16) and this thread's shares of the rows' sums, stored by
      // stmatrix .trans: the S^T accumulators of n-block j are two 8 x 8 fragments (tokens g and
      // g + 8 x query rows 2c, 2c + 1), and transposed each lands as 8 query rows of 8 tokens, one
      // 16-byte chunk of P^T's rows (4 stores a thread where two-byte ones took 32).
      // This thread's unrounded P of n-block jb (pl: token g, ph: token g + 8; query rows 2c, 2c + 1),
      // added to its shares of the rows' sums.
      const auto p_of_block = [&](int jb, float (&pl)[2], float (&ph)[2]) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int k = 2 * jb + e, n = row_of(k, c), j = 4 * jb + e;
          const float m = sM[parity * 64 + n];
          const float mbase = m == -INFINITY ? 0.f : m;
          pl[e] = fast_exp2(sacc[j] - mbase);  // (masked: 0)
          ph[e] = fast_exp2(sacc[j + 2] - mbase);
          l[k] += pl[e] + ph[e];
        }
      };
      if constexpr (kDF) {
        if (own) {
          // kDF: kF8's P^T once per latent group g, into block g, each value p x s[t][g] x 2^-E_g
          // (< 2^8: the lazy maxima's p <= 2^8 and the pair's scales below 2^E_g).
          const int ls = wide_launder(lane);
          c = ls % 4;
          const int mq = ls / 8, mi = ls % 8;
          float4 lo, hi;
          token_scales(lo, hi);
          const float slo[4] = {lo.x, lo.y, lo.z, lo.w}, shi[4] = {hi.x, hi.y, hi.z, hi.w};
          float f_lo[4], f_hi[4];
          // (E_g is the same in the whole block: while every E_g is within float32's normal
          // exponents - scales between about 2^-126 and 2^126 - 2^-E_g is one float, built from its
          // bits, and each factor one multiply; else ldexpf's range splitting. No nonzero scale yet:
          // the tokens' scales are 0 or NaN, their factors 0 or NaN.)
          bool normal_e = true;
#pragma unroll
          for (int G = 0; G < 4; ++G) normal_e &= ex_g[G] == kNoExp || (ex_g[G] >= -126 && ex_g[G] <= 126);
          auto factors = [&](auto normal) {
#pragma unroll
            for (int G = 0; G < 4; ++G) {
              if (ex_g[G] == kNoExp) {
                f_lo[G] = slo[G] * 0.f;
                f_hi[G] = shi[G] * 0.f;
              } else if constexpr (decltype(normal)::value) {
                const float down = wide_pow2_normal(-ex_g[G]);
                f_lo[G] = slo[G] * down;
                f_hi[G] = shi[G] * down;
              } else {
                f_lo[G] = ldexpf(slo[G], -ex_g[G]);
                f_hi[G] = ldexpf(shi[G], -ex_g[G]);
              }
            }
          };
          if (normal_e)
            factors(std::true_type{});
          else
            factors(std::false_type{});
          // (the probabilities in sacc's place - each read once into p_of_block - then per group
          // the products with the factors, packed as kF8's, one stmatrix a group and 4 n-blocks)
#pragma unroll
          for (int jb = 0; jb < 8; ++jb) {
            float pl[2], ph[2];
            p_of_block(jb, pl, ph);
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              sacc[4 * jb + e] = pl[e];
              sacc[4 * jb + 2 + e] = ph[e];
            }
          }
#pragma unroll
          for (int G = 0; G < 4; ++G) {
#pragma unroll
            for (int jj = 0; jj < 8; jj += 4) {
              uint32_t pk[4];
#pragma unroll
              for (int q = 0; q < 4; ++q) {
                const float* pq = sacc + 4 * (jj + q);  // [0], [1]: token g, rows 2c, 2c + 1; [2], [3]: token g + 8
                pk[q] = wide_e4m3x2(pq[0] * f_lo[G], pq[2] * f_hi[G]) |
                        (wide_e4m3x2(pq[1] * f_lo[G], pq[3] * f_hi[G]) << 16);
              }
              stsm_x4_trans(sbase + S::kPt + G * S::kBlock + sw128_offset(8 * (jj + mq) + mi, 4 * wg + ww), pk[0],
                            pk[1], pk[2], pk[3]);
            }
          }
        }
      } else if constexpr (kF8) {
        if (own) {
          // kF8: P^T of both tiles in one block, e4m3, tile t's 64 tokens at bytes 64 t of each query
          // row; in each warp's 16-token group byte 2u + e holds token u + 8 e (wide_v_fragments_f8's
          // order): a thread packs (token g, token g + 8) of a row into one 16-bit unit, and stmatrix
          // .trans stores 8 units (16 bytes) of 8 rows per matrix, one n-block a matrix.
          const int ls = wide_launder(lane);
          c = ls % 4;
          const int mq = ls / 8, mi = ls % 8;  // this lane's address: row mi of matrix mq
#pragma unroll
          for (int jj = 0; jj < 8; jj += 4) {
            uint32_t pk[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) {  // n-block jj + q
              const int jb = jj + q;
              float pl[2], ph[2];
              p_of_block(jb, pl, ph);
              pk[q] = wide_e4m3x2(pl[0], ph[0]) | (wide_e4m3x2(pl[1], ph[1]) << 16);  // rows 2c, 2c + 1
            }
            // Matrix mq: n-block jj + mq; its row mi is query row 8 (jj + mq) + mi, chunk 4 wg + ww of
            // P^T's 128-byte row (tile wg's tokens 16 ww ..).
            stsm_x4_trans(sbase + S::kPt + sw128_offset(8 * (jj + mq) + mi, 4 * wg + ww), pk[0], pk[1], pk[2], pk[3]);
          }
        }
      } else if (own) {
        const int ls = wide_launder(lane);
        c = ls % 4;
        const uint32_t pt = sbase + S::kPt + wg * S::kBlock;
        const int mq = ls / 8, mi = ls % 8;  // this lane's address: row mi of matrix mq
#pragma unroll
        for (int jj = 0; jj < 8; jj += 2) {
          uint32_t pk[4];
#pragma unroll
          for (int q = 0; q < 2; ++q) {  // n-block jj + q
            const int jb = jj + q;
            float pl[2], ph[2];
            p_of_block(jb, pl, ph);
            using PT = std::conditional_t<kB, gpu_bf16, gpu_half>;
            pk[2 * q] = pack2<PT>(pl[0], pl[1]);      // token g; rows 2c, 2c + 1 of block jb
            pk[2 * q + 1] = pack2<PT>(ph[0], ph[1]);  // token g + 8
          }
          // Matrix mq: n-block jj + mq / 2, tokens 16 ww + 8 (mq % 2) ..; its row mi is query row
          // 8 (jj + mq / 2) + mi, chunk 2 ww + mq % 2 of P^T's 128-byte row.
          stsm_x4_trans(pt + sw128_offset(8 * (jj + mq / 2) + mi, 2 * ww + mq % 2), pk[0], pk[1], pk[2], pk[3]);
        }
      }
      tr(69);
      // The copy engine brings whole pages, so in a sequence's last tile the rows past kv_len hold
      // whatever the page holds there (maybe NaN, and 0 x NaN is NaN): the tile's warpgroup zeroes
      // their latent bytes now that its S^T is done with them (their scores are masked by
      // position), before both warpgroups' O^T read them as V after the barrier below (the fence
      // there also orders these stores before the copy engine's next write of the buffer).
      const int valid = kv_len - mine * kMlaTileKeys;
      if (!kSparse && own && valid < kMlaTileKeys) {  // (kSparse: such rows came zero-filled)
        unsigned char* rawp = base + S::kRaw + (wg ? st1 : st0) * S::kRawStride;
        for (int i = tw; i < (kMlaTileKeys - valid) * 32; i += 128) {  // (row, latent block, 16 bytes)
          const int row = valid + i / 32, blk = (i / 8) % 4, chunk = i % 8;
          *reinterpret_cast<int4*>(rawp + blk * kMlaRawBlock + row * 128 + chunk * 16) = make_int4(0, 0, 0, 0);
        }
        if constexpr (kDs) {  // and their scales (the O^T side's factors: 0 x 0, not 0 x NaN)
          for (int row = valid + tw; row < kMlaTileKeys; row += 128) {
            *reinterpret_cast<int4*>(rawp + 4 * kMlaRawBlock + row * kMlaDsTailRow) = make_int4(0, 0, 0, 0);
          }
        }
      }
      fence_proxy_async_shared();  // P^T, for the products' async-proxy reads
      named_barrier_sync(kWideBarBoth, 256);
      tr(70);
      // O^T += V^T P^T over the pair's tiles for this warpgroup's 256 columns: per tile 8 groups
      // (64-column block mb, 32 tokens h) of two k-steps, pipelined as S^T's.
#pragma unroll 1
      for (int t = 0; t < (has1 ? 2 : 1); ++t) {
        // (the other warpgroup waited for its tile's bytes before the barriers; this wait, on a
        // phase that cannot move before this warp releases the buffer, passes at once)
        const int stage = t ? st1 : st0;
        wait_first(stage, t ? ph1 : ph0);
        wait_rest(stage, t ? ph1 : ph0);
        tr(71 + 4 * t);  // (tile t's marks: 71-74, 75-78)
        const uint32_t raw = sbase + S::kRaw + stage * S::kRawStride;
        const uint64_t p_desc = wgmma_desc_sw128(sbase + S::kPt + t * S::kBlock, 16, 1024);
        const int lo = wide_launder(lane);
        const float* tsc = tile_scales(stage);  // kDs: taken per group below
        auto ot_addr = [&](int gi) {  // tokens 32 (gi % 2) + lane, columns 256 wg + 64 (gi / 2) + 16 ww
          return raw + Tile::latent(32 * (gi % 2) + lo, 256 * wg + 64 * (gi / 2) + 16 * ww);
        };
        uint32_t rr[4], a[2][8];
        ldmatrix_x4_trans(rr, ot_addr(0));
        if constexpr (kF8) {
          // kF8: per tile 8 k32 products (64-column block gi / 2, 32 tokens gi % 2), A the raw bytes
          // as they are; P^T of tile t at bytes 64 t of its rows.
          const uint64_t pf_desc = wgmma_desc_sw128(sbase + S::kPt, 16, 1024);
#pragma unroll
          for (int gi = 0; gi < 8; ++gi) {
            wgmma_wait<1>();
            wide_v_fragments_f8(a[gi % 2], rr);
            if (gi + 1 < 8) ldmatrix_x4_trans(rr, ot_addr(gi + 1));
            if constexpr (kSparse) {  // (kDF's sparse lists: handed back as the other modes' below)
              if (gi == 7) {
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[stage]);
              }
            }
            wgmma_fence();
            // (kDF: m-block gi / 2 of this warpgroup's columns lies in group 2 wg + gi / 4: its P^T block)
            const uint32_t pt_at = (kDF ? (2 * wg + gi / 4) * S::kBlock : 0) + 64 * t + 32 * (gi % 2);
            wgmma_m64n64k32_rs_f8<kE5m2>(o[gi / 2], a[gi % 2], wgmma_desc_advance(pf_desc, pt_at), 1);
            wgmma_commit();
          }
        } else {
          // kSparse: the tile is handed back as soon as its last values are in registers (A comes
          // from registers: the products read nothing of the raw tile). Handing back rows 0-31
          // half way, with the k-steps reordered, measured level (NOTES item 70 a).
#pragma unroll
          for (int gi = 0; gi < 8; ++gi) {
            wgmma_wait<1>();
            wide_v_fragments<kE5m2>(a[gi % 2], rr);
            if (gi + 1 < 8) ldmatrix_x4_trans(rr, ot_addr(gi + 1));
            if constexpr (kDs) {
              // An A register holds one column at two tokens: scales s_t0, s_t1 of the columns' group
              // (256 wg + 64 (gi / 2) + 16 ww lies in group 2 wg + gi / 4); k-step s2's tokens are
              // 32 (gi % 2) + 16 s2 + 2c, + 1 (registers 0, 1) and + 8, + 9 (registers 2, 3).
              const int grp = 2 * wg + gi / 4, cq = wide_launder(lane) % 4;
#pragma unroll
              for (int s2 = 0; s2 < 2; ++s2) {
                const int t0 = 32 * (gi % 2) + 16 * s2 + 2 * cq;
                const float* c0 = tsc + t0 * kRow + grp;
                const float s0 = c0[0], s1 = c0[kRow], s8 = c0[8 * kRow], s9 = c0[9 * kRow];
                uint32_t* set = a[gi % 2] + 4 * s2;
                if constexpr (kH) {
                  const uint32_t h01 = pack2<gpu_half>(s0, s1), h89 = pack2<gpu_half>(s8, s9);
                  set[0] = f16x2_mul(set[0], h01);
                  set[1] = f16x2_mul(set[1], h01);
                  set[2] = f16x2_mul(set[2], h89);
                  set[3] = f16x2_mul(set[3], h89);
                } else {
                  set[0] = half2_bits_scaled_to<gpu_bf16>(set[0], s0, s1);
                  set[1] = half2_bits_scaled_to<gpu_bf16>(set[1], s0, s1);
                  set[2] = half2_bits_scaled_to<gpu_bf16>(set[2], s8, s9);
                  set[3] = half2_bits_scaled_to<gpu_bf16>(set[3], s8, s9);
                }
              }
            }
            if constexpr (kSparse) {
              if (gi == 7) {
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[stage]);
              }
            }
            wgmma_fence();
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int step = 2 * (gi % 2) + h;  // P^T bytes 32 step of each row
              const uint64_t pd = wgmma_desc_advance(p_desc, 32 * step);
              if constexpr (kB) wgmma_m64n64k16_rs_bf16(o[gi / 2], a[gi % 2] + 4 * h, pd, 1);
              else wgmma_m64n64k16_rs_f16(o[gi / 2], a[gi % 2] + 4 * h, pd, 1);
            }
            wgmma_commit();
          }
        }
        tr(72 + 4 * t);
        // The tile's buffer is done with (both warpgroups' S^T of it passed the barriers, and this
        // warpgroup's products are complete): the loader may refill it while tile 1's run (kSparse:
        // handed back in the loop above).
        wgmma_wait<0>();
#pragma unroll
        for (int mb = 0; mb < 4; ++mb)
#pragma unroll
          for (int i = 0; i < 32; ++i) reg_fence(o[mb][i]);
        tr(73 + 4 * t);
        if constexpr (!kSparse) {
          __syncwarp();
          if (lane == 0) mbar_arrive(&empty[stage]);
        }
        tr(74 + 4 * t);
      }
    }
    if (tiles.end - tiles.begin > 0 && ((tiles.end - tiles.begin) & 1)) use -= 1;  // (the last pair had one tile)
    tr(79);

    // Epilogue: each row's sum over the 8 warps' shares; each warpgroup writes its 256 columns
    // (whole sequences to the output, cut ones as float partials for the merge).
    {
      const int ce = wide_launder(lane) % 4;
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        float x = l[k];
#pragma unroll
        for (int off = 4; off <= 16; off *= 2) x += gpu::shfl_xor(x, off);
        if (lane < 4) sSum[row_of(k, ce) * 8 + warp] = x;
      }
    }
    if (tw == 0) sBad[kWideStages + wg] = bad ? 1 : 0;
    named_barrier_sync(kWideBarBoth, 256);
    const bool any_bad = (sBad[kWideStages] | sBad[kWideStages + 1]) != 0;
    const int g = wide_launder(lane) / 4, c = wide_launder(lane) % 4;
    const bool whole = s.seq_pieces[b] == 1;
    const int slot = whole ? 0 : mla_piece_slot(s, part, b);
    float e_mb[4] = {1.f, 1.f, 1.f, 1.f};  // kDF: O^T's m-blocks times 2^E of their group
    if constexpr (kDF) {
#pragma unroll
      for (int mb = 0; mb < 4; ++mb) {
        const int e = wg ? ex_g[2 + mb / 2] : ex_g[mb / 2];  // (group 2 wg + mb / 2; constant indices)
        e_mb[mb] = e == kNoExp ? 1.f : wide_pow2(e);
      }
    }
    // Each row's factor and lse once (threads 0-63, a row each) into shared memory (sMax's place:
    // the pairs' maxima exchange is over, and the next sequence's first barrier orders its writes
    // after every read below): the unrolled stores read them - a row's code there ~25
    // instructions shorter - and whole and cut sequences run separate loops, so the code a
    // sequence's epilogue runs through is about a third of what it was (NOTES item 84 h: the
    // epilogue, once a sequence, took 10-20k cycles with ~37-44 KB of code, waiting on instruction
    // fetch; item 85: this cut 4-10% per call off the fp8 modes, same outputs bit for bit).
    float* sInv = sMax;                                        // [row]
    uint32_t* sKeep = reinterpret_cast<uint32_t*>(sMax + 64);  // [row]
    if (tid < 64) {
      const int n = tid;
      const float4 x0 = *reinterpret_cast<const float4*>(sSum + n * 8);
      const float4 x1 = *reinterpret_cast<const float4*>(sSum + n * 8 + 4);
      const float sum = ((x0.x + x0.y) + (x0.z + x0.w)) + ((x1.x + x1.y) + (x1.z + x1.w));
      const MlaRowFactor f = mla_row_factor(sum, kv_scale, any_bad);
      sInv[n] = f.inv;
      sKeep[n] = f.keep;
      if (row0 + n < rows_per_b) {
        const float lse = mla_row_lse(sM[parity * 64 + n], sum, any_bad);
        if (whole) p.lse[int64_t(b) * rows_per_b + row0 + n] = lse;
        else ws_lse[int64_t(slot) * rows_per_b + row0 + n] = lse;
      }
    }
    named_barrier_sync(kWideBarBoth, 256);
    tr(81);
    if (whole) {
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        if (k == 8) tr(82);
        const int n = row_of(k, c), j = 4 * (k / 2) + k % 2;
        const MlaRowFactor f{sInv[n], sKeep[n]};
        // This thread's words of row n, columns 256 wg + 64 mb + 16 ww + 2 g (mb = 0..3); after a
        // 4 x 4 transpose across the lanes g = 4 h + i (lanes 16 h + 4 i + c), lane i holds columns
        // 256 wg + 64 i + 16 ww + 8 h .. + 7 - one 16-byte store where four 4-byte ones were. (A
        // row past the sequence's is computed and not stored: the transposes need every lane; the
        // lanes that exchange share c, so the row.)
        uint32_t v[4];
#pragma unroll
        for (int mb = 0; mb < 4; ++mb) {
          v[mb] = pack2<T>(mla_row_output(o[mb][j] * e_mb[mb], f), mla_row_output(o[mb][j + 2] * e_mb[mb], f));
        }
        quad_transpose4<4>(v, g % 4);
        const int col = 256 * wg + 64 * (g % 4) + 16 * ww + 8 * (g / 4);
        if (row0 + n < rows_per_b) {
          *reinterpret_cast<uint4*>(static_cast<T*>(p.out) + (int64_t(b) * rows_per_b + row0 + n) * kMlaLatentDim +
                                    col) = make_uint4(v[0], v[1], v[2], v[3]);
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        if (k == 8) tr(82);
        const int n = row_of(k, c), j = 4 * (k / 2) + k % 2;
        if (row0 + n >= rows_per_b) continue;
        const MlaRowFactor f{sInv[n], sKeep[n]};
        float* dst = ws_out + (int64_t(slot) * rows_per_b + row0 + n) * kMlaLatentDim;
#pragma unroll
        for (int mb = 0; mb < 4; ++mb) {
          const int col = 256 * wg + 64 * mb + 16 * ww + 2 * g;
          *reinterpret_cast<float2*>(dst + col) =
              make_float2(mla_row_output(o[mb][j] * e_mb[mb], f), mla_row_output(o[mb][j + 2] * e_mb[mb], f));
        }
      }
    }
    tr(80);
  }
}
#endif

template <typename T, bool kE5m2, bool kF8 = false>
__global__ void __launch_bounds__(kWideThreads, 1)
    mla_fp8_wide_kernel(const MlaDecodeParams p, int page_shift, int row_blocks, const MlaSchedule s,
                        float* __restrict__ ws_out, float* __restrict__ ws_lse,
                        const __grid_constant__ CUtensorMap cache_map) {
#if defined(JP_HAVE_WGMMA)
  pdl_wait();  // a dependent launch, as the wgmma kernel's (kernel.cuh)
  if (p.early_dependents) pdl_launch_dependents();
  mla_fp8_wide_body<T, kE5m2, false, false, kF8>(p, page_shift, row_blocks, s, ws_out, ws_lse, &cache_map);
#endif
}
// The wide kernel on DeepSeek-V3.2's 656-byte rows read with ds_dequant="bfloat16" (kDs, NOTES item 49).
// kH: read with ds_dequant="float16" (f16 products).
// kF8 (fp8_math=True, dense rows or sparse lists): kDF, the fp8-math mode.
template <typename T, bool kSparse, bool kH = false, bool kF8 = false>
__global__ void __launch_bounds__(kWideThreads, 1)
    mla_ds_wide_kernel(const MlaDecodeParams p, int page_shift, int row_blocks, const MlaSchedule s,
                       float* __restrict__ ws_out, float* __restrict__ ws_lse,
                       const __grid_constant__ CUtensorMap latent_map, const __grid_constant__ CUtensorMap tail_map) {
#if defined(JP_HAVE_WGMMA)
  pdl_wait();
  if (p.early_dependents) pdl_launch_dependents();
  mla_fp8_wide_body<T, false, true, kSparse, kF8, kH>(p, page_shift, row_blocks, s, ws_out, ws_lse, &latent_map,
                                                       &tail_map);
#endif
}

}  // namespace jaxpaged
