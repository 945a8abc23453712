// MLA decode over a per-tensor fp8 cache on fp8 tensor cores, for sequences of at most 16 query
// rows (s_q x Hq <= 16: Hq = 16 decode, or Hq = 8 with two query tokens, ...), bf16 queries, the
// combined 576-byte rows in pages of >= 64 tokens (TMA). Built for sm_90a only (fp8_narrow.cu).
//
// On by default where it applies (JAXPAGED_MLA_FP8_NARROW=0 opts out: handler_gpu.cu). Its early
// intermittent launch failure (a full barrier's parity aliasing between the two warpgroups, fixed
// by kNarrowFull) no longer showed on the H100 in session 24: stress loops, the GPU fp8 and MLA
// tests, memcheck and synccheck (NOTES item 44 d, tools/mla_fp8_narrow_stress.py).
//
// Why a kernel of its own: the wgmma kernel (kernel.cuh) computes on 16-bit tiles, so an fp8 tile
// is converted by its loader, and that conversion chain bounds the path (NOTES items 42-43: 30% of
// copy bandwidth at Hq = 16). Here the raw fp8 tiles go from the copy engine straight to the
// tensor cores, and the work is laid out for few query rows, in the transposed form
//   S^T = K Q'^T    [64 tokens x 32]   (M = the tile's tokens, N = the queries' split rows)
//   O^T += V^T P'^T [512 x 32]         (M = latent columns, N = the probabilities' split rows)
// with both products m64n32k32 (fp8 operands only in that form: both K-major, so V^T's fragments
// are transposed in registers, as the product's register A operand; nothing else is transposed):
// the accumulators then hold the 16 query rows' numbers and
// nothing for the 48 rows a 64-row product would waste, which leaves registers to promote every
// partial product to float32 - Hopper's fp8 products keep fewer bits than float32 in their sums
// (measured with tools/wgmma_fp8_probe.cu, NOTES item 44: S over 576 columns in one accumulator is
// off by 1.2e-3 of its row's largest, O accumulated over 64 tiles by 9e-3), so S^T is promoted
// every kNarrowSPromote k-steps and O^T after every tile.
//
// Exactness of the operands (NOTES item 43 e, tools/mla_fp8_split_model.py): each bf16 query row
// is scaled by a power of two putting its largest |value| in (224, 448] and split into two e4m3
// terms hi + lo, exact down to about 2^-10 of that largest value; the two terms are the N rows
// 2q and 2q + 1, whose products a thread holds side by side and adds. Probabilities p in [0, 1]
// are split the same way after times 256. So the fp8 products' inputs carry bf16's 8 significant
// bits, and the cache's values are exact.
//
// Block = one partition of the schedule (partition_schedule.cuh) x all 16 query rows; 384
// threads: warpgroups 0 and 1 compute, warpgroup 2 loads. The loader's one thread streams the
// partition's 64-token tiles into a ring of kNarrowStages raw buffers (five TMA boxes of 64 tokens
// x 128 bytes each: four latent column blocks and the rope block, whose second half the engine
// zero-fills past column 576). The compute warpgroups take the tiles in turn (two independent
// chains per SM: a tile's work is a chain of short dependent steps, so one warpgroup alone left
// the copies waiting), each keeping its own running maxima, sums and all 512 columns of O; per
// tile
//   S^T (18 k-steps, promoted), the scores scaled and masked, the tile's maxima over the
//   warpgroup's four warps (shared memory, one named barrier), probabilities split into P'^T
//   (shared memory), then O^T's product in two halves of 256 columns (the partials' registers),
//   its A operand V^T's fragments in registers, loaded k-step by k-step into two buffers
//   (ldmatrix .trans of byte pairs from the raw tile, byte_perm: a few instructions per 16
//   bytes), the raw buffer handed back once the last are loaded, the second half promoted after
//   the warpgroup's next tile's wait. At a sequence's end the two warpgroups' states meet in
//   shared memory (each rescales the other's to the common maximum) and each writes 256 columns.
// (Until session 54 V was transposed into a V^T in shared memory by stmatrix, and the product read
// it from there: that transposer was about half of each tile's chain, NOTES items 78 f / 79.)
// The fragments hold tokens permuted within each 16-token group (token 8a + 2i + e at k position
// 4i + 2a + e: the order ldmatrix .trans delivers them in), and P'^T is written in the same order,
// so the product over tokens is unchanged; and the product's rows are the columns permuted within
// each 16 (row g: column 2g, row g + 8: 2g + 1), so a thread's two rows of O are adjacent columns.
// Tokens past a sequence's end are zeroed in the fragments (the copy
// engine brings whole pages, whose rows past kv_len may hold anything); their scores are masked by
// value. Queries past the sequence's rows are zero and never stored.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_fp8.h>

#include "common/fp8.cuh"
#include "common/gpu_math.cuh"
#include "common/pdl.cuh"
#include "common/masking.h"
#include "common/sm80/mma.cuh"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"
#include "mla_decode/params.h"
#include "mla_decode/partition_schedule.cuh"
#include "mla_decode/sm90/epilogue.cuh"  // mla_row_factor, mla_row_output, mla_row_lse
#include "mla_decode/sm90/fp8_ring.cuh"
#include "mla_decode/sm90/loader.cuh"    // mla_entry_ok
#include "mla_decode/sm90/trace.cuh"

namespace jaxpaged {

constexpr int kNarrowThreads = 384;  // two compute warpgroups + the loader's (one thread works)
// Registers per thread after the loader warpgroup hands its share over (3 x 168 in all, as in
// layout.cuh's MlaWgRegs): the compute warpgroups hold O (64 floats), the O^T partials (64), S^T and
// its two partials (48), the tile's scores and probabilities, and O^T's A fragments (two k-steps',
// 8) with their tail masks (4). ptxas honours the 232 (at 168 this kernel spills 360 bytes), and
// at its peak needs most of it: all of a half's fragments at once (32) spilled 272 bytes (NOTES
// item 79 a).
constexpr int kNarrowComputeRegs = 232, kNarrowLoaderRegs = 40;
constexpr int kNarrowStages = 3;     // raw tile buffers
// "full" barriers: one per (raw buffer, compute warpgroup), so that each is waited by one
// warpgroup, in order. (With one per buffer, the 3-buffer ring dealt alternately to two
// warpgroups has a buffer's consecutive uses waited by different warpgroups: a warpgroup could
// wait for use k + 3 while use k, the other's, was still landing, and the parity it waits for -
// that of the phase before - read as complete. It passed at once, read a half-landed tile and
// released the buffer early, and the ring fell a phase out of step: NOTES item 44 d.)
constexpr int kNarrowFull = 2 * kNarrowStages;
constexpr int kNarrowSPromote = 2;   // S^T k-steps (of 32 columns) per float32 promotion

// Shared memory, byte offsets from a 1024-aligned base.
struct MlaNarrowSmem {
  static constexpr int kBlocks = kMlaRawBlocks;  // column blocks of 128 bytes: 4 latent + rope
  static constexpr int kQBlock = 32 * 128;       // a column block of Q': 32 split rows
  static constexpr int kRawBlock = kMlaRawBlock;  // a column block of a raw tile: 64 tokens
  static constexpr int kRawBytes = kMlaRawBytes;
  static constexpr int kXchBytes = kNarrowQueries * 256 * 4;  // a warpgroup's 256 columns of O, for the other
  static constexpr int kPtBytes = 32 * 64;      // P'^T: 32 split rows x 64 token slots
  static constexpr int kQ = 0;
  static constexpr int kRaw = kQ + kBlocks * kQBlock;             // [stage]
  static constexpr int kXch = kRaw + kNarrowStages * kRawBytes;   // [warpgroup]
  static constexpr int kPt = kXch + 2 * kXchBytes;                // [warpgroup]
  static constexpr int kMax = kPt + 2 * kPtBytes;                 // [warpgroup][parity][warp][query] floats
  static constexpr int kSum = kMax + 2 * 2 * 4 * kNarrowQueries * 4;  // [warpgroup][warp][query] floats
  static constexpr int kPeer = kSum + 2 * 4 * kNarrowQueries * 4;     // [warpgroup][max, sum][query], [2] bad
  static constexpr int kQScale = kPeer + (4 * kNarrowQueries + 4) * 4;  // [query]: 2^-k of its split
  static constexpr int kBad = kQScale + kNarrowQueries * 4;           // [stage]: the tile's page id was bad
  static constexpr int kBarriers = kBad + 16;                         // full[kNarrowFull], empty[stages]
  static constexpr size_t kAllocBytes = size_t(kBarriers) + (kNarrowFull + kNarrowStages) * 8 + 1024;  // + alignment
  static_assert(kRaw % 1024 == 0 && kPt % 1024 == 0, "swizzle atoms need aligned bases");
  static_assert(kBad + 4 * kNarrowStages <= kBarriers && kBarriers % 8 == 0, "barriers overlap or misalign");
};
static_assert(MlaNarrowSmem::kAllocBytes <= 227 * 1024, "more shared memory than a Hopper block may have");
static_assert(2 * kNarrowComputeRegs + kNarrowLoaderRegs <= 3 * (65536 / kNarrowThreads / 8 * 8),
              "register budgets exceed the block's registers");

#if defined(JP_HAVE_WGMMA)
// Named barriers: 1 + warpgroup (its 128 threads), 3 (both compute warpgroups).
constexpr int kNarrowBarBoth = 3;

__device__ __forceinline__ uint8_t narrow_to_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}
__device__ __forceinline__ float narrow_from_e4m3(uint8_t b) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(fp8x2_to_half2_bits(b, false))));
}

template <typename T, bool kE5m2>
__device__ __forceinline__ void mla_fp8_narrow_body(const MlaDecodeParams& p, int page_shift, const MlaSchedule& s,
                                                    float* __restrict__ ws_out, float* __restrict__ ws_lse,
                                                    const CUtensorMap* cache_map) {
  using S = MlaNarrowSmem;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(base + S::kBarriers);
  uint64_t* empty = full + kNarrowFull;
  int* sBad = reinterpret_cast<int*>(base + S::kBad);
  float* sQScale = reinterpret_cast<float*>(base + S::kQScale);

  const int tid = threadIdx.x, lane = tid % 32;
  const int warp = gpu::shfl(tid / 32, 0);  // (uniform in the warp, known to be so)
  const int part = blockIdx.x;
  const int first_b = max(s.part_first[part], 0), last_b = min(s.part_last[part], int(p.batch) - 1);
  const int rows_per_b = int(p.s_q * p.num_heads);
  const int64_t capacity = p.max_pages * p.page_size;

  if (tid == 0) {
    for (int i = 0; i < kNarrowFull; ++i) mbar_init(&full[i], 1);  // the loader's arrival, with the bytes
    for (int i = 0; i < kNarrowStages; ++i) mbar_init(&empty[i], 4);  // each warp of the warpgroup that took it
    fence_proxy_async_shared();
  }
  __syncthreads();

  if (warp >= 8) {  // the loader warpgroup: one thread issues the copies
    warpgroup_regs_shrink<kNarrowLoaderRegs>();
    if (warp == 8 && lane == 0) {
      mla_fp8_tma_ring<kNarrowStages, kNarrowFull>(p, page_shift, s, part, first_b, last_b, capacity, cache_map,
                                                   base + S::kRaw, full, empty, sBad);
    }
    return;
  }

  // The compute warpgroups.
  warpgroup_regs_grow<kNarrowComputeRegs>();
  const int wg = warp / 4, ww = warp % 4, c = lane % 4;
  // The timeline probe's marks (trace.cuh; nothing outside tools/mla_trace.cu's build): ids
  // 100-113, the same in both warpgroups (role = wg); the loader's 90-95 (fp8_ring.cuh).
  MlaTrace tr(p, wg);
  tr(100);
  const int bar_own = 1 + wg;
  const uint32_t sbase = smem_addr(base);
  const float* qk_pow = sQScale;
  float* sMax = reinterpret_cast<float*>(base + S::kMax) + wg * 2 * 4 * kNarrowQueries;
  float* sSum = reinterpret_cast<float*>(base + S::kSum) + wg * 4 * kNarrowQueries;
  const float kv_scale = mla_kv_scale(p);
  const float qk_base = mla_scale(p) * kLog2e * kv_scale;  // (the values are the fp8 values x kv_scale)
  // This thread's tokens of a tile (S^T's rows r and r + 8) and their slots in P'^T.
  const int tok_lo = ww * 16 + lane / 4;
  const int slot_lo = ww * 16 + 4 * ((lane / 4) / 2) + (lane / 4) % 2, slot_hi = slot_lo + 2;
  const T* q_nope = static_cast<const T*>(p.q_nope);
  const T* q_pe = static_cast<const T*>(p.q_pe);

  int use = 0;     // tiles of this block so far (both warpgroups' count: the raw ring's position)
  int tcount = 0;  // tiles this warpgroup has done (the maxima's parity)
  for (int b = first_b; b <= last_b; ++b) {
    const int kv_len = int(clamp_kv_len(p.kv_lens[b], capacity));
    const TileSpan tiles = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));

    // The sequence's queries, split: both warpgroups are done with the previous sequence's S^T.
    named_barrier_sync(kNarrowBarBoth, 256);
    {
      const int q = tid / 16, sub = tid % 16;  // 16 threads per query row, 4.5 chunks of 8 each
      const bool live = q < rows_per_b;
      const int64_t g = int64_t(b) * rows_per_b + (live ? q : 0);
      uint4 v[5];
      float mx = 0.f;
#pragma unroll
      for (int i = 0; i < 5; ++i) {
        const int ch = sub + 16 * i;
        v[i] = make_uint4(0, 0, 0, 0);
        if (live && ch < 72) {
          v[i] = ch < 64 ? *reinterpret_cast<const uint4*>(q_nope + g * kMlaLatentDim + ch * 8)
                         : *reinterpret_cast<const uint4*>(q_pe + g * kMlaRopeDim + (ch - 64) * 8);
        }
        const uint32_t w4[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {  // (fmaxf drops NaN: a NaN does not set the scale)
          const float2 x = bf16x2_to_float2(w4[k]);
          mx = fmaxf(mx, fmaxf(fabsf(x.x), fabsf(x.y)));
        }
      }
#pragma unroll
      for (int off = 1; off <= 8; off *= 2) mx = fmaxf(mx, gpu::shfl_xor(mx, off));
      const int k = e4m3_query_exponent(mx);  // (the row's largest |value| into (224, 448])
      const float f = ldexpf(1.f, k);
      if (sub == 0) sQScale[q] = ldexpf(1.f, -k);
#pragma unroll
      for (int i = 0; i < 5; ++i) {
        const int ch = sub + 16 * i;
        if (ch >= 72) continue;
        const uint32_t w4[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
        uint32_t hi[2] = {0, 0}, lo[2] = {0, 0};
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const uint32_t bits = e % 2 ? (w4[e / 2] & 0xFFFF0000u) : (w4[e / 2] << 16);
          const float x = __uint_as_float(bits) * f;
          // (e4m3 has no infinity: an infinite query value becomes NaN, as its scores would)
          const uint8_t h = isinf(x) ? uint8_t(0x7F) : narrow_to_e4m3(x);
          const uint8_t l = narrow_to_e4m3(x - narrow_from_e4m3(h));
          hi[e / 4] |= uint32_t(h) << (8 * (e % 4));
          lo[e / 4] |= uint32_t(l) << (8 * (e % 4));
        }
        const int col = ch * 8, blk = col / 128, within = col % 128;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int n = 2 * q + h;
          unsigned char* at = base + S::kQ + blk * S::kQBlock + sw128_offset(n, within / 16) + within % 16;
          *reinterpret_cast<uint2*>(at) = h ? make_uint2(lo[0], lo[1]) : make_uint2(hi[0], hi[1]);
        }
      }
    }
    fence_proxy_async_shared();
    named_barrier_sync(kNarrowBarBoth, 256);
    tr(101);

    // This thread's queries q_j = 4 j + c: score scales and visible ends.
    float qk[4];
    int end[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int q = 4 * j + c;
      qk[j] = qk_base * qk_pow[q];
      end[j] = (p.causal && q < rows_per_b) ? int(visible_keys(kv_len, p.s_q, q / p.num_heads, 0).end) : kv_len;
    }
    float m[4], l[4];  // running maxima (log2 domain) and this thread's share of the sums
    float o[8][4][2];  // O[q_j][d] x 256 for m-block mb, columns d = 64 mb + 16 ww + 2 (lane / 4) + h
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      m[j] = -INFINITY;
      l[j] = 0.f;
    }
#pragma unroll
    for (int mb = 0; mb < 8; ++mb)
#pragma unroll
      for (int j = 0; j < 4; ++j) o[mb][j][0] = o[mb][j][1] = 0.f;
    float pv[4][16];  // O^T's product over four m-blocks, promoted into o once complete
    // O^T's A operand, an m-block's fragments ([k-step][register], each k-step's register set
    // reloaded once the product that read it is complete): live until the products that read
    // them complete, the second half's last m-block across the loop's turn (keep_va).
    uint32_t va[2][4];
    auto keep_va = [&]() {
#pragma unroll
      for (int k = 0; k < 8; ++k) reg_fence(va[k / 4][k % 4]);
    };
    float corr_pending[4] = {1.f, 1.f, 1.f, 1.f};
    bool pending = false;  // m-blocks 4-7 of this warpgroup's last tile are still in the tensor cores
    bool bad = false;
    // o[mb0 .. mb0 + 3] = o * corr + pv (the product complete).
    auto promote_o = [&](int mb0, const float(&corr)[4]) {
#pragma unroll
      for (int mb = 0; mb < 4; ++mb)
#pragma unroll
        for (int i = 0; i < 16; ++i) reg_fence(pv[mb][i]);
#pragma unroll
      for (int mb = 0; mb < 4; ++mb) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          o[mb0 + mb][j][0] = o[mb0 + mb][j][0] * corr[j] + (pv[mb][4 * j] + pv[mb][4 * j + 1]);
          o[mb0 + mb][j][1] = o[mb0 + mb][j][1] * corr[j] + (pv[mb][4 * j + 2] + pv[mb][4 * j + 3]);
        }
      }
    };
    const uint32_t ptd = sbase + S::kPt + wg * S::kPtBytes;
    const uint64_t pt_desc = wgmma_desc_sw64(ptd);
    // (S^T's descriptors: one per matrix, moved by constant offsets - one add each, where building
    // each from its address took a shift, masks and ors on the uniform datapath)
    const uint64_t q_desc = wgmma_desc_sw128(sbase + S::kQ, 16, 1024);

    // The sequence's tiles alternate between the warpgroups (by the block's running tile count,
    // which is also the raw buffers' ring position).
    for (int u = tiles.begin; u < tiles.end; ++u, ++use) {
      if ((use & 1) != wg) continue;
      const int stage = use % kNarrowStages;
      tr(110);
      mbar_wait(&full[use % kNarrowFull], uint32_t(use / kNarrowFull) & 1u);
      tr(102);
      bad |= sBad[stage] != 0;
      if (pending) {  // the previous tile's last product ran behind this tile's wait
        wgmma_wait<0>();
        keep_va();
        promote_o(4, corr_pending);
        pending = false;
      }
      tr(111);
      const uint32_t raw = sbase + S::kRaw + stage * S::kRawBytes;
      const uint64_t raw_desc = wgmma_desc_sw128(raw, 16, 1024);
      // S^T = K Q'^T, 18 k-steps in groups of kNarrowSPromote, each group from zero into one of two
      // partial accumulators (while the other's group runs) and added to sacc in float32.
      float sacc[16], pa[16], pb[16];
      constexpr int kGroupsS = 18 / kNarrowSPromote;
      static_assert(18 % kNarrowSPromote == 0 && 16 % kNarrowSPromote == 0, "groups must not straddle the rope block");
      auto issue_group = [&](float(&acc)[16], int g) {
        wgmma_fence();
#pragma unroll
        for (int i = 0; i < kNarrowSPromote; ++i) {
          const int k = g * kNarrowSPromote + i, blk = k / 4, off = 32 * (k % 4);
          wgmma_m64n32k32_f8<kE5m2>(acc, wgmma_desc_advance(raw_desc, blk * S::kRawBlock + off),
                                    wgmma_desc_advance(q_desc, blk * S::kQBlock + off), i > 0);
        }
        wgmma_commit();
      };
      auto add_group = [&](float(&acc)[16], bool first) {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          reg_fence(acc[i]);
          sacc[i] = first ? acc[i] : sacc[i] + acc[i];
        }
      };
      issue_group(pa, 0);
      issue_group(pb, 1);
      wgmma_wait<1>();
      add_group(pa, true);
#pragma unroll
      for (int g = 2; g < kGroupsS; ++g) {
        if (g % 2 == 0) {
          issue_group(pa, g);
          wgmma_wait<1>();
          add_group(pb, false);
        } else {
          issue_group(pb, g);
          wgmma_wait<1>();
          add_group(pa, false);
        }
      }
      wgmma_wait<0>();
      if (kGroupsS % 2 == 0) add_group(pb, false);
      else add_group(pa, false);
      tr(103);

      // Scores of this thread's tokens for its queries (log2 domain), masked; the tile's maxima.
      const int t_lo = u * kMlaTileKeys + tok_lo, t_hi = t_lo + 8;
      float sv[4][2], tmax[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sv[j][0] = t_lo < end[j] ? (sacc[4 * j] + sacc[4 * j + 1]) * qk[j] : -INFINITY;
        sv[j][1] = t_hi < end[j] ? (sacc[4 * j + 2] + sacc[4 * j + 3]) * qk[j] : -INFINITY;
        tmax[j] = fmaxf(sv[j][0], sv[j][1]);
#pragma unroll
        for (int off = 4; off <= 16; off *= 2) tmax[j] = fmaxf(tmax[j], gpu::shfl_xor(tmax[j], off));
      }
      float* mx_out = sMax + (tcount & 1) * 4 * kNarrowQueries;
      if (lane < 4) {
#pragma unroll
        for (int j = 0; j < 4; ++j) mx_out[ww * kNarrowQueries + 4 * j + c] = tmax[j];
      }
      named_barrier_sync(bar_own, 128);
      tr(104);
      float corr[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int q = 4 * j + c;
        const float tm = fmaxf(fmaxf(mx_out[q], mx_out[kNarrowQueries + q]),
                               fmaxf(mx_out[2 * kNarrowQueries + q], mx_out[3 * kNarrowQueries + q]));
        const float m_new = fmaxf(m[j], tm);
        corr[j] = m_new == -INFINITY ? 1.f : fast_exp2(m[j] - m_new);
        m[j] = m_new;
      }
      tr(112);
      // Probabilities x 256, split into P'^T (rows 2 q + {hi, lo}, this thread's two token slots).
      unsigned char* pt = base + S::kPt + wg * S::kPtBytes;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float mb = m[j] == -INFINITY ? 0.f : m[j];
        float pr[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) pr[h] = fast_exp2(sv[j][h] - mb);  // (exp2(-inf) = 0: masked)
        l[j] = l[j] * corr[j] + pr[0] + pr[1];
        const int n = 8 * j + 2 * c;  // P'^T's rows of query 4 j + c: n (hi), n + 1 (lo)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float x = pr[h] * 256.f;
          const uint8_t hb = narrow_to_e4m3(x);
          const uint8_t lb = narrow_to_e4m3(x - narrow_from_e4m3(hb));
          const int slot = h ? slot_hi : slot_lo;
          pt[sw64_offset(n, slot / 16) + slot % 16] = hb;
          pt[sw64_offset(n + 1, slot / 16) + slot % 16] = lb;
        }
      }
      // V^T's fragments, the register A operand of O^T's products: for m-block mb and k-step kk
      // this warp's rows are the 16 columns 64 mb + 16 ww .. + 15 (row g: column 2 g, row g + 8:
      // column 2 g + 1) over the tile's tokens 32 kk .. + 31. One ldmatrix .trans of the four 8 x 16-
      // byte matrices (tokens 32 kk + 8 a + 0..7, the 16 columns) hands lane l the byte pairs
      // (columns 2 (l / 4), + 1) of tokens 2 (l % 4), + 1 of each; byte_perm joins matrices 0 and 1
      // (2 and 3) into one word per column: tokens 2c, 2c + 1, 2c + 8, 2c + 9 (+ 16), which are the
      // token slots 4c .. 4c + 3 (+ 16) that the fragment's k positions name, P'^T's order.
      const int valid = kv_len - u * kMlaTileKeys;  // tokens of this tile before the sequence's end
      uint32_t keep[4] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};  // [16-token group]
      if (valid < kMlaTileKeys) {
#pragma unroll
        for (int g = 0; g < 4; ++g) {
          const int t0 = 16 * g + 2 * c;  // the k positions hold tokens t0, t0 + 1, t0 + 8, t0 + 9
          keep[g] = (t0 < valid ? 0xFFu : 0u) | (t0 + 1 < valid ? 0xFF00u : 0u) | (t0 + 8 < valid ? 0xFF0000u : 0u) |
                    (t0 + 9 < valid ? 0xFF000000u : 0u);
        }
      }
      // m-block mb's fragments of k-step kk, into va[kk].
      auto load_v = [&](int mb, int kk) {
        uint32_t rr[4];  // lane l addresses row l % 8 of matrix l / 8: token 32 kk + l
        ldmatrix_x4_trans(rr, raw + MlaRawTile<false>::latent(32 * kk + lane, 64 * mb + 16 * ww));
        const uint32_t k0 = keep[2 * kk], k1 = keep[2 * kk + 1];
        va[kk][0] = __byte_perm(rr[0], rr[1], 0x6420) & k0;
        va[kk][1] = __byte_perm(rr[0], rr[1], 0x7531) & k0;
        va[kk][2] = __byte_perm(rr[2], rr[3], 0x6420) & k1;
        va[kk][3] = __byte_perm(rr[2], rr[3], 0x7531) & k1;
      };
      // O^T's product for the half's m-block i, k-step kk (A from va[kk]) into pv[i], one commit
      // group each.
      auto issue_pv = [&](int i, int kk) {
        wgmma_fence();
        wgmma_m64n32k32_rs_f8<kE5m2>(pv[i], va[kk], wgmma_desc_advance(pt_desc, 32 * kk), kk > 0);
        wgmma_commit();
      };
      // A half: m-blocks mb0 .. mb0 + 3, eight products in turn, st = 2 (mb - mb0) + kk (a k-step's
      // registers are loaded again once the product before the last is complete); after the second
      // half's last load the raw tile is handed back.
      auto run_half = [&](int mb0) {
#pragma unroll
        for (int st = 0; st < 8; ++st) {
          if (st >= 2) wgmma_wait<1>();
          load_v(mb0 + st / 2, st % 2);
          if (mb0 > 0 && st == 7) {
            // The raw tile is done with (S^T's products are complete, and the fragments' loads are
            // ordered before the arrival, which releases the buffer to the loader's next copy).
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[stage]);
          }
          issue_pv(st / 2, st % 2);
        }
      };
      tr(113);
      fence_proxy_async_shared();  // P'^T, for the products' async-proxy reads
      tr(105);
      named_barrier_sync(bar_own, 128);
      tr(106);
      // O^T += V^T P'^T in two halves of four 64-column blocks (the partials' registers): the
      // first promoted at once, the second after this warpgroup's next tile's wait (or the loop).
      run_half(0);
      wgmma_wait<0>();
      promote_o(0, corr);
      tr(107);
      run_half(4);
      tr(108);
#pragma unroll
      for (int j = 0; j < 4; ++j) corr_pending[j] = corr[j];
      pending = true;
      ++tcount;
    }
    if (pending) {
      wgmma_wait<0>();
      keep_va();
      promote_o(4, corr_pending);
    }

    // Epilogue: each warpgroup's rows' sums over its four warps; the two warpgroups' states (maxima,
    // sums, outputs) meet: each publishes its maxima, sums and the 256 columns the other writes,
    // then writes its 256 columns of the combined result (whole
    // sequences to the output, cut ones as float partials for the merge).
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int off = 4; off <= 16; off *= 2) l[j] += gpu::shfl_xor(l[j], off);
    }
    if (lane < 4) {
#pragma unroll
      for (int j = 0; j < 4; ++j) sSum[ww * kNarrowQueries + 4 * j + c] = l[j];
    }
    named_barrier_sync(bar_own, 128);
    float* peer = reinterpret_cast<float*>(base + S::kPeer);  // [warpgroup][max, sum][query], [2] bad
    float* xch = reinterpret_cast<float*>(base + S::kXch + wg * S::kXchBytes);  // [query][256] floats
    float lw[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int q = 4 * j + c;
      lw[j] = sSum[q] + sSum[kNarrowQueries + q] + sSum[2 * kNarrowQueries + q] + sSum[3 * kNarrowQueries + q];
      if (ww == 0 && lane < 4) {
        peer[(wg * 2) * kNarrowQueries + q] = m[j];
        peer[(wg * 2 + 1) * kNarrowQueries + q] = lw[j];
      }
    }
    if (ww == 0 && lane == 0) reinterpret_cast<int*>(peer + 4 * kNarrowQueries)[wg] = bad ? 1 : 0;
    const int other = 1 - wg;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // (the m-block picked by a select: a register array indexed at run time would go to memory)
          xch[(4 * j + c) * 256 + 64 * i + 16 * ww + 2 * (lane / 4) + h] = wg ? o[i][j][h] : o[4 + i][j][h];
        }
      }
    }
    named_barrier_sync(kNarrowBarBoth, 256);
    const float* pxch = reinterpret_cast<const float*>(base + S::kXch + other * S::kXchBytes);
    const bool any_bad = (reinterpret_cast<const int*>(peer + 4 * kNarrowQueries)[0] |
                          reinterpret_cast<const int*>(peer + 4 * kNarrowQueries)[1]) != 0;
    const bool whole = s.seq_pieces[b] == 1;
    const int slot = whole ? 0 : mla_piece_slot(s, part, b);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int q = 4 * j + c;
      if (q >= rows_per_b) continue;
      const float m_peer = peer[(other * 2) * kNarrowQueries + q], l_peer = peer[(other * 2 + 1) * kNarrowQueries + q];
      const float mm = fmaxf(m[j], m_peer);
      // (a warpgroup that saw no key of the row has max -inf: weight 0)
      const float c_own = m[j] == -INFINITY ? 0.f : fast_exp2(m[j] - mm);
      const float c_peer = m_peer == -INFINITY ? 0.f : fast_exp2(m_peer - mm);
      const float sum = c_own * lw[j] + c_peer * l_peer;
      const MlaRowFactor f = mla_row_factor(sum, kv_scale / 256.f, any_bad);  // (o holds P x 256 times V)
      const int64_t row = int64_t(b) * rows_per_b + q;
      const int64_t ws_row = int64_t(slot) * rows_per_b + q;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int dl = 64 * i + 16 * ww + 2 * (lane / 4) + h, d = 256 * wg + dl;
          const float x =
              mla_row_output(c_own * (wg ? o[4 + i][j][h] : o[i][j][h]) + c_peer * pxch[q * 256 + dl], f);
          if (whole) static_cast<T*>(p.out)[row * kMlaLatentDim + d] = from_float<T>(x);
          else ws_out[ws_row * kMlaLatentDim + d] = x;
        }
      }
      if (wg == 0 && ww == 0 && lane < 4) {
        const float lse = mla_row_lse(mm, sum, any_bad);
        if (whole) p.lse[row] = lse;
        else ws_lse[ws_row] = lse;
      }
    }
    tr(109);
  }
}
#endif

template <typename T, bool kE5m2>
__global__ void __launch_bounds__(kNarrowThreads, 1)
    mla_fp8_narrow_kernel(const MlaDecodeParams p, int page_shift, const MlaSchedule s, float* __restrict__ ws_out,
                          float* __restrict__ ws_lse, const __grid_constant__ CUtensorMap cache_map) {
#if defined(JP_HAVE_WGMMA)
  pdl_wait();  // a dependent launch, as the wgmma kernel's (kernel.cuh)
  if (p.early_dependents) pdl_launch_dependents();
  mla_fp8_narrow_body<T, kE5m2>(p, page_shift, s, ws_out, ws_lse, &cache_map);
#endif
}

}  // namespace jaxpaged
