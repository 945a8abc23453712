// MLA decode on Hopper warpgroup tensor cores (wgmma; built for sm_90a only), warp-specialized.
//
// Block = 64 query rows (of one sequence's s_q x Hq) x one partition of the KV work
// (partition_schedule.cuh); 384 threads = three warpgroups:
//   warpgroup 2 (loader): streams the partition's keys in 64-token tiles (576 wide) into two
//     shared-memory tile buffers, page ids a pair ahead: with pages of >= 64 tokens one thread
//     issues a TMA box per 64-column block (kTma), else 128 threads issue 16-byte cp.async
//     copies (a small page's tile gathers rows from several pages). Each buffer is split into
//     three column groups - L (columns 0-255), R (256-511) and the rope block (512-575) - with a
//     "full" and an "empty" mbarrier each, because the groups fall free at different times: the
//     loader refills them in the order they fall free (mla_group_in_order), each as soon as its
//     last reader is done, not when the whole tile is.
//   warpgroups 0 and 1 (compute): take the tiles in pairs (t0 in buffer 0, t1 in buffer 1) and
//     split the work "seesaw" fashion so both do the same amount and one's softmax overlaps the
//     other's products (the schedule of FlashMLA's Hopper decode kernel):
//       WG0: S0 = Q K0^T; m0 = running max with S0; P0 = exp(S0 - m0); O_L += P0 V0_L
//       WG1: S1 = Q K1^T; m1 = max(m0, rowmax S1); P1 = exp(S1 - m1); O_R += P1 V1_R
//       WG0: P0 brought to m1 for WG1; O_L to m1; O_L += P1 V1_L    (P1 read from shared memory)
//       WG1: O_R += P0 V0_R                                          (P0 read from shared memory)
//     and each issues the S of its next tile once its last product of the pair is done and its
//     groups are handed back (WG0 blocking on the next S0's refills before releasing buffer 1's
//     L and rope held up WG1's next S1; NOTES item 27), so the tensor cores have queued work
//     while the warpgroups do softmax. A tile's P is written over
//     its rope block (only S reads it). Each compute warpgroup keeps its 256 output columns in
//     registers (128 floats per thread).
// Tiles are stored with the 128-byte swizzle, so each is at once the K operand (K-major) of
// S = Q K^T and the V operand (MN-major, its first 512 columns) of O = P V; a P tile (64 x 64) is
// a K-major A operand in the same format. The rows' queries (512 latent + 64 rope) stay in shared
// memory; S reads both operands from there. S is a 64 x 64 product per tile (m64n64k16): with N
// = 64 every 16-column step reads 2 KiB of Q and 2 KiB of K, the rate the tensor cores consume
// them (N = 32 read Q twice as often and was bound by shared-memory bandwidth; NOTES item 14).
// Keys past kv_len or past a causal row's last key get probability 0, and their K/V bytes are
// zero-filled (0 * garbage must not reach a product); rows past the sequence's s_q x Hq read zero
// queries and are never stored.
#pragma once

#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "common/mbarrier_sm90.cuh"
#include "common/mma_sm80.cuh"
#include "common/tma_sm90.cuh"
#include "common/wgmma_sm90.cuh"
#include "mla_decode/params.h"
#include "mla_decode/partition_schedule.cuh"

namespace jaxpaged {

constexpr int kMlaWgThreads = 384;          // two compute warpgroups + one loader
constexpr int kMlaWgRows = 64;              // query rows per block: the wgmma M
constexpr int kMlaWgKeys = kMlaTileKeys;    // cache tokens per tile (the schedule's unit)
// Registers per thread after the loader hands its share over. The block starts with 168 per
// thread (65536 / 384, rounded down to a multiple of 8); a warpgroup that asks for more than the
// others gave back waits forever, so the new budgets must fit in the same 3 x 168. The cp.async
// loader needs 56 to issue its copies fully unrolled (at 40 it spilled or, with loops kept
// rolled, became instruction-bound and starved the compute warpgroups: NOTES item 22); the TMA
// loader is one thread with a handful of values.
template <bool kTma>
struct MlaWgRegs {
  static constexpr int kCompute = kTma ? 232 : 224;
  static constexpr int kLoader = kTma ? 32 : 56;
  static_assert(2 * kCompute + kLoader <= 3 * (65536 / kMlaWgThreads / 8 * 8),
                "register budgets exceed the block's registers");
};

// The copy engine's maps of the cache (tensor_map_host.h), for the TMA loader: ckv as
// [pages][page_size][512] and kpe as [pages][page_size][64], boxes of 64 tokens x 64 columns.
struct MlaTmaMaps {
  CUtensorMap ckv, kpe;
};

// Column groups of a tile buffer, each with its own full/empty barrier pair.
enum MlaColGroup : int { kGroupL = 0, kGroupR = 1, kGroupRope = 2, kGroups = 3 };
// The order in which the groups of a pair's buffers fall free (and are refilled and then read by
// the next S): buffer 0's L (after WG0's P0 V0_L), buffer 1's R (after WG1's P1 V1_R), buffer 0's
// R and rope (after WG1's P0 V0_R), buffer 1's L and rope (after WG0's P1 V1_L). The k-th group an
// S reads of buffer buf is mla_group_in_order(buf, k): buffer 1's tile is read R, L, rope.
__device__ __forceinline__ constexpr int mla_group_in_order(int buf, int k) {
  return buf == 0 || k == 2 ? k : 1 - k;
}

// Shared memory, byte offsets from a 1024-aligned base (the swizzle atoms must be 1024-aligned).
struct MlaWgSmem {
  static constexpr int kWidth = kMlaLatentDim + kMlaRopeDim;  // 576
  static constexpr int kColBlocks = kWidth / 64;              // 9 column blocks of 128 bytes
  static constexpr int kColBlockBytes = 64 * 128;             // 64 rows (queries or keys): 8 KiB
  static_assert(kMlaWgRows == 64 && kMlaWgKeys == 64, "a column block holds 64 rows");
  static constexpr int kTileBytes = kColBlocks * kColBlockBytes;  // 72 KiB
  static constexpr int kRopeBlock = 8 * kColBlockBytes;           // where a tile's P goes after S
  static constexpr int kQ = 0;
  static constexpr int kTile0 = kTileBytes;                       // two tile buffers follow Q
  static constexpr int kMax = kTile0 + 2 * kTileBytes;  // [2 warpgroups][128 threads][2] floats
  static constexpr int kSum = kMax + 2 * 128 * 2 * 4;   // same shape: row sums at the end
  static constexpr int kBad = kSum + 2 * 128 * 2 * 4;   // [2 buffers][4 loader warps] + [2 warpgroups] ints
  static constexpr int kPages = kBad + 16 * 4;          // [2 buffers][4 tokens][128 loader threads] page ids
  static constexpr int kBarriers = kPages + 2 * 4 * 128 * 4;  // full[2][3], empty[2][3]
  static constexpr size_t kAllocBytes = size_t(kBarriers) + 2 * 2 * kGroups * 8 + 1024;  // + alignment
};
static_assert(MlaWgSmem::kAllocBytes <= 227 * 1024, "more shared memory than a Hopper block may have");

// Rows' running maxima and masking state of one compute thread (rows r_lo and r_hi).
struct MlaRowPair {
  float lo, hi;
};

template <typename T>
__device__ __forceinline__ uint32_t scale_pack2(uint32_t v, float s) {
  float2 f;
  if constexpr (std::is_same<T, gpu_bf16>::value) {
    f = __bfloat1622float2(*reinterpret_cast<const gpu_bf16x2*>(&v));
  } else {
    f = __half22float2(*reinterpret_cast<const __half2*>(&v));
  }
  return pack2<T>(f.x * s, f.y * s);
}

// Copies one thread's 16-byte chunk of column blocks [cb_begin, cb_end) of a 576-wide row into
// the swizzled column blocks at dst (block_bytes apart): blocks 0-7 from the 512-wide latent part,
// block 8 from the 64-wide rope part. `latent` and `rope` point at the thread's chunk of the row;
// an invalid row is zero-filled (its pointers must still be addresses the copy may name, but
// nothing is read from them).
template <typename T>
__device__ __forceinline__ void copy_row_chunk(unsigned char* dst, int block_bytes, const T* latent,
                                               const T* rope, bool valid, int cb_begin = 0,
                                               int cb_end = MlaWgSmem::kColBlocks) {
#pragma unroll
  for (int cb = cb_begin; cb < cb_end; ++cb) {
    cp_async_16(dst + cb * block_bytes, cb < MlaWgSmem::kColBlocks - 1 ? latent + cb * 64 : rope, valid);
  }
}

// kTma: the loader is one thread issuing a TMA box per column block (pages of >= 64 tokens: a
// tile is a 64-row slice of one page); otherwise 128 threads issue 16-byte cp.async copies.
template <typename T, bool kTma>
__global__ void __launch_bounds__(kMlaWgThreads, 1)
    mla_wgmma_kernel(const MlaDecodeParams p, int page_shift, int row_blocks, const MlaSchedule s,
                     float* __restrict__ ws_out, float* __restrict__ ws_lse,
                     const __grid_constant__ MlaTmaMaps maps) {
#if defined(JP_HAVE_WGMMA)
  using S = MlaWgSmem;
  extern __shared__ unsigned char smem_raw[];
  // Offset from smem_raw (not an integer cast) so the compiler still knows these are shared addresses.
  unsigned char* base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  float* sMax = reinterpret_cast<float*>(base + S::kMax);
  float* sSum = reinterpret_cast<float*>(base + S::kSum);
  int* sBadPage = reinterpret_cast<int*>(base + S::kBad);  // [buffer][loader warp]
  int* sBadWg = sBadPage + 8;                              // [compute warpgroup], per sequence
  int* sPage = reinterpret_cast<int*>(base + S::kPages);   // the loader's page ids of the current pair
  uint64_t* full = reinterpret_cast<uint64_t*>(base + S::kBarriers);  // [buffer][group]
  uint64_t* empty = full + 2 * kGroups;

  const int tid = threadIdx.x, tw = tid % 128, lane = tid % 32;
  // Through a shuffle so the compiler knows it is the same in a warp (wgmma under branches on it
  // would otherwise be serialized).
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  const int part = blockIdx.x / row_blocks, rb = blockIdx.x % row_blocks;
  const int first_b = s.part_first[part], last_b = s.part_last[part];
  // 32-bit rows and token positions (kv_lens are int32) keep register pressure down.
  const int rows_per_b = int(p.s_q * p.num_heads);
  const int row0 = rb * kMlaWgRows;
  const int64_t capacity = p.max_pages * p.page_size;
  // Eight consecutive threads fill one 128-byte row (chunk ld_chunk), so global reads coalesce
  // and the swizzled stores hit eight bank groups.
  const int ld_chunk = tid % 8;

  if (tid == 0) {
    for (int i = 0; i < 2 * kGroups; ++i) {
      // cp.async: each loader thread's copies landed + a plain arrival from it; TMA: the one
      // thread's arrival, which also names the bytes to wait for.
      mbar_init(&full[i], kTma ? 1 : 2 * 128);
      mbar_init(&empty[i], 4);  // each warp of the one warpgroup that reads the group last
    }
    for (int i = 0; i < 8; ++i) sBadPage[i] = 0;  // (the TMA loader writes only each buffer's first)
    fence_proxy_async_shared();  // the barriers, for the copy engine's arrivals
  }
  __syncthreads();

  // The 64-token tiles [begin, end) of sequence b this block processes.
  auto tile_range = [&](int b, int64_t kv_len) { return mla_piece_tiles(s, part, b, mla_tiles_of(kv_len)); };

  if (wg == 2) {
    // ---------------------------------------------------------------- loader warpgroup
    warpgroup_regs_shrink<MlaWgRegs<kTma>::kLoader>();
    if constexpr (kTma) {
      if (tw != 0) return;
      tma_prefetch_map(&maps.ckv);
      tma_prefetch_map(&maps.kpe);
      int uses0 = 0, uses1 = 0;  // tiles loaded into each buffer so far (all sequences)
      for (int b = first_b; b <= last_b; ++b) {
        const int kv_len = int(clamp_kv_len(p.kv_lens[b], capacity));
        const TileSpan tiles = tile_range(b, kv_len);
        const int32_t* table = p.block_tables + int64_t(b) * p.max_pages;
        // A tile's page id (its 64 tokens share a page), read a pair ahead. An out-of-range id
        // is passed on as it is: the engine zero-fills a box outside the map, and the flag
        // makes the sequence's output NaN.
        auto page_of = [&](int tile) { return table[(tile * kMlaWgKeys) >> page_shift]; };
        int32_t pg0 = tiles.begin < tiles.end ? page_of(tiles.begin) : 0;
        int32_t pg1 = tiles.begin + 1 < tiles.end ? page_of(tiles.begin + 1) : 0;
        for (int u = tiles.begin; u < tiles.end; u += 2) {
          const bool has1 = u + 1 < tiles.end;
          const uint32_t parity0 = (uses0 & 1) ^ 1, parity1 = (uses1 & 1) ^ 1;
          ++uses0;
          if (has1) ++uses1;
#pragma unroll
          for (int step = 0; step < 2 * kGroups; ++step) {  // release order, as below
            constexpr int kBuf[6] = {0, 1, 0, 0, 1, 1};
            constexpr int kOrder[6] = {0, 0, 1, 2, 1, 2};
            const int buf = kBuf[step], g = mla_group_in_order(buf, kOrder[step]);
            if (buf == 1 && !has1) continue;
            const int t = u + buf;
            const int32_t page = buf ? pg1 : pg0;
            unsigned char* tile = base + S::kTile0 + buf * S::kTileBytes;
            uint64_t* bar = &full[buf * kGroups + g];
            mbar_wait(&empty[buf * kGroups + g], buf ? parity1 : parity0);
            if (kOrder[step] == 0) sBadPage[buf * 4] = page < 0 || page >= p.num_pages ? 1 : 0;
            const int slot = (t * kMlaWgKeys) & int(p.page_size - 1);
            if (g == kGroupRope) {
              mbar_arrive_expect_tx(bar, S::kColBlockBytes);
              tma_load_3d(tile + 8 * S::kColBlockBytes, &maps.kpe, 0, slot, page, bar);
            } else {
              mbar_arrive_expect_tx(bar, 4 * S::kColBlockBytes);
#pragma unroll
              for (int cb = 4 * g; cb < 4 * g + 4; ++cb) {
                tma_load_3d(tile + cb * S::kColBlockBytes, &maps.ckv, cb * 64, slot, page, bar);
              }
            }
          }
          if (u + 2 < tiles.end) pg0 = page_of(u + 2);
          if (u + 3 < tiles.end) pg1 = page_of(u + 3);
        }
      }
      return;
    }
    const T* ckv = static_cast<const T*>(p.ckv);
    const T* kpe = static_cast<const T*>(p.kpe);
    const int kv_row = tw / 8;  // tokens kv_row + 16 h (h < 4) of a tile
    int uses[2] = {0, 0};       // tiles loaded into each buffer so far (all sequences)
    for (int b = first_b; b <= last_b; ++b) {
      // 32-bit token positions (kv_lens are int32): fewer registers for the loader.
      const int kv_len = int(clamp_kv_len(p.kv_lens[b], capacity));
      const TileSpan tiles = tile_range(b, kv_len);
      const int32_t* table = p.block_tables + int64_t(b) * p.max_pages;
      auto entry = [&](int tile, int h) -> int32_t {
        const int j = tile * kMlaWgKeys + kv_row + 16 * h;
        return j < kv_len ? table[j >> page_shift] : 0;
      };
      // Page ids of this thread's four tokens in each tile of a pair, read a pair ahead.
      int32_t e0[4], e1[4];
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        e0[h] = tiles.begin < tiles.end ? entry(tiles.begin, h) : 0;
        e1[h] = tiles.begin + 1 < tiles.end ? entry(tiles.begin + 1, h) : 0;
      }
      for (int u = tiles.begin; u < tiles.end; u += 2) {  // t0 of a pair in buffer 0, t1 in buffer 1
        const bool has1 = u + 1 < tiles.end;
        const uint32_t parity0 = (uses[0] & 1) ^ 1, parity1 = (uses[1] & 1) ^ 1;
        ++uses[0];
        if (has1) ++uses[1];
        // The six groups of the pair in the order they fall free (mla_group_in_order), so that
        // waiting for one never holds back a group that is already free.
#pragma unroll
        for (int step = 0; step < 2 * kGroups; ++step) {
          constexpr int kBuf[6] = {0, 1, 0, 0, 1, 1};
          constexpr int kOrder[6] = {0, 0, 1, 2, 1, 2};  // k-th group of that buffer
          const int buf = kBuf[step], g = mla_group_in_order(buf, kOrder[step]);
          if (buf == 1 && !has1) continue;
          const int t = u + buf;
          unsigned char* tile = base + S::kTile0 + buf * S::kTileBytes;
          int* page_ids = sPage + buf * 4 * 128;
          mbar_wait(&empty[buf * kGroups + g], buf ? parity1 : parity0);
          if (kOrder[step] == 0) {
            // The tile's page ids (read during the previous pair) checked once and parked in
            // shared memory, so no registers hold them through its three groups: -1 marks a row
            // past kv_len or with an out-of-range id (zero-filled). The corrupt-page flags
            // travel with the tile's first group.
            bool bad = false;
#pragma unroll
            for (int h = 0; h < 4; ++h) {
              const int32_t e = buf ? e1[h] : e0[h];
              const bool in_seq = t * kMlaWgKeys + kv_row + 16 * h < kv_len;
              const bool ok = e >= 0 && e < p.num_pages;
              bad |= in_seq && !ok;
              page_ids[h * 128 + tw] = in_seq && ok ? e : -1;
            }
            bad = __any_sync(0xffffffffu, bad);
            if (lane == 0) sBadPage[buf * 4 + tw / 32] = bad ? 1 : 0;
          }
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            const int r = kv_row + 16 * h;
            const int slot = (t * kMlaWgKeys + r) & int(p.page_size - 1);
            const int32_t page = page_ids[h * 128 + tw];
            const int64_t pg = page < 0 ? 0 : page;
            copy_row_chunk(tile + sw128_offset(r, ld_chunk), S::kColBlockBytes,
                           ckv + pg * p.ckv_page_stride + slot * p.ckv_slot_stride + ld_chunk * 8,
                           kpe + pg * p.kpe_page_stride + slot * p.kpe_slot_stride + ld_chunk * 8,
                           page >= 0, 4 * g, g == kGroupRope ? S::kColBlocks : 4 * g + 4);
          }
          mbar_arrive_on_cp_async(&full[buf * kGroups + g]);
          mbar_arrive(&full[buf * kGroups + g]);
        }
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          if (u + 2 < tiles.end) e0[h] = entry(u + 2, h);
          if (u + 3 < tiles.end) e1[h] = entry(u + 3, h);
        }
      }
    }
    return;
  }

  // ------------------------------------------------------------------ compute warpgroups
  warpgroup_regs_grow<MlaWgRegs<kTma>::kCompute>();
  constexpr int kComputeThreads = 256;
  // Named barriers between the two compute warpgroups (0 is __syncthreads).
  constexpr int kBarM0 = 1;       // WG0 published m0
  constexpr int kBarP1 = 2;       // WG1 published m1 and stored P1
  constexpr int kBarP0 = 3;       // WG0 stored P0 (brought to m1)
  constexpr int kBarCompute = 4;  // both, at sequence boundaries
  constexpr int kBarOwn = 5;      // + wg: this warpgroup alone
  const uint64_t q_desc = wgmma_desc_sw128(smem_addr(base + S::kQ), 16, 1024);
  const float qk_scale = p.scale * kLog2e;
  // This thread's two rows in the accumulator layout (the same in both warpgroups).
  const int r_lo = (tw / 32) * 16 + lane / 4, r_hi = r_lo + 8;
  float* my_max = sMax + wg * 256 + 2 * tw;                // what this thread publishes
  const float* peer_max = sMax + (1 - wg) * 256 + 2 * tw;  // what the other warpgroup's twin did
  const T* q_nope = static_cast<const T*>(p.q_nope);
  const T* q_pe = static_cast<const T*>(p.q_pe);
  auto tile_ptr = [&](int buf) { return base + S::kTile0 + buf * S::kTileBytes; };
  auto tile_bad = [&](int buf) {
    const int4 f = *reinterpret_cast<const int4*>(sBadPage + buf * 4);
    return (f.x | f.y | f.z | f.w) != 0;
  };
  // This warp is done with column group g of buffer buf (the loader may refill it).
  auto release = [&](int buf, int g) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[buf * kGroups + g]);
  };
  // Issues (does not wait for) S = Q K^T over the column groups of the tile in buffer buf, in the
  // order they are refilled (mla_group_in_order), each once it has landed: 64 x 64 scores, 4 wgmma
  // m64n64k16 per column block. Returns whether a page id of the tile was out of range (known once
  // its first group has landed).
  auto issue_scores = [&](float (&sacc)[32], int buf, uint32_t parity) {
    bool bad = false;
    // Laundered so the compiler derives the 36 operand descriptors here rather than possibly
    // keeping them live across the pair loop (72 registers). Added while chasing spills; ptxas's
    // spill count did not change with it, and the measured kernel has it.
    uint64_t q_d = q_desc, k_desc = wgmma_desc_sw128(smem_addr(tile_ptr(buf)), 16, 1024);
    asm volatile("" : "+l"(q_d), "+l"(k_desc));
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int g = mla_group_in_order(buf, k);
      mbar_wait(&full[buf * kGroups + g], parity);
      fence_proxy_async_shared();  // the landed bytes, for wgmma's async-proxy reads
      if (k == 0) bad = tile_bad(buf);
      const int cb_end = g == kGroupRope ? S::kColBlocks : 4 * g + 4;
      if (k == 0) wgmma_fence();
#pragma unroll
      for (int cb = 4 * g; cb < cb_end; ++cb) {
#pragma unroll
        for (int kq = 0; kq < 4; ++kq) {
          const uint32_t off = cb * S::kColBlockBytes + kq * 32;
          wgmma_m64n64k16_ss<T>(sacc, wgmma_desc_advance(q_d, off), wgmma_desc_advance(k_desc, off),
                                k > 0 || cb > 4 * g || kq > 0);
        }
      }
    }
    wgmma_commit();
    return bad;
  };
  auto wait_scores = [&](float (&sacc)[32]) {
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) reg_fence(sacc[i]);
  };
  // V descriptor of this warpgroup's 256 columns of the tile in buffer buf (MN-major).
  auto v_desc = [&](int buf) {
    return wgmma_desc_sw128(smem_addr(tile_ptr(buf)) + 4 * wg * S::kColBlockBytes, S::kColBlockBytes, 1024);
  };
  // O_half += P V[:, half] with P from registers (A fragments; 4 wgmma m64n256k16).
  auto pv_from_regs = [&](float (&o)[128], const uint32_t (&pa)[16], int buf) {
    const uint64_t vd = v_desc(buf);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t a[4] = {pa[4 * kk], pa[4 * kk + 1], pa[4 * kk + 2], pa[4 * kk + 3]};
      wgmma_m64n256k16_rs_tb<T>(o, a, wgmma_desc_advance(vd, kk * 16 * 128), 1);
    }
  };
  // O_half += P V[:, half] with P from the tile's rope block, where the other warpgroup put it.
  auto pv_from_smem = [&](float (&o)[128], int buf) {
    const uint64_t vd = v_desc(buf);
    const uint64_t pd = wgmma_desc_sw128(smem_addr(tile_ptr(buf) + S::kRopeBlock), 16, 1024);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      wgmma_m64n256k16_ss_tb<T>(o, wgmma_desc_advance(pd, kk * 32), wgmma_desc_advance(vd, kk * 16 * 128), 1);
    }
  };
  // Scales S to the log2 domain, with masked keys at -inf when `mask` (only tiles that reach past
  // a row's last visible key need it); returns the rows' maxima over the tile.
  auto tile_max = [&](float (&sacc)[32], int u, bool mask, int end_lo, int end_hi) {
    // Accumulator j of this thread: key 8 (j / 4) + 2 (lane % 4) + j % 2 of the tile, row r_lo
    // for j % 4 < 2, else r_hi. Keys are compared as offsets in the tile.
    const int tile0 = u * kMlaWgKeys + 2 * (lane % 4);
    const int lim_lo = max(-1, min(end_lo - tile0, kMlaWgKeys));
    const int lim_hi = max(-1, min(end_hi - tile0, kMlaWgKeys));
    MlaRowPair mx{-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int key = 8 * (j / 4) + (j % 2);
      const bool hi = (j % 4) >= 2;
      sacc[j] = !mask || key < (hi ? lim_hi : lim_lo) ? sacc[j] * qk_scale : -INFINITY;
      if (hi) mx.hi = fmaxf(mx.hi, sacc[j]);
      else mx.lo = fmaxf(mx.lo, sacc[j]);
    }
#pragma unroll
    for (int off = 1; off <= 2; off *= 2) {  // the 4 threads of a quad hold one row
      mx.lo = fmaxf(mx.lo, JP_SHFL_XOR(mx.lo, off));
      mx.hi = fmaxf(mx.hi, JP_SHFL_XOR(mx.hi, off));
    }
    return mx;
  };
  // P = exp2(S - m) as 16-bit wgmma A fragments; returns the rows' sums (this thread's share).
  auto probabilities = [&](float (&sacc)[32], MlaRowPair m, uint32_t (&pa)[16]) {
    const float base_lo = m.lo == -INFINITY ? 0.f : m.lo, base_hi = m.hi == -INFINITY ? 0.f : m.hi;
    MlaRowPair sum{0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 32; ++j) {  // exp2(-inf) = 0 for masked keys
      const bool hi = (j % 4) >= 2;
      sacc[j] = fast_exp2(sacc[j] - (hi ? base_hi : base_lo));
      if (hi) sum.hi += sacc[j];
      else sum.lo += sacc[j];
    }
    // Accumulator layout -> A layout: keys 16 kk .. 16 kk + 15 are accumulator groups 2 kk, 2 kk + 1.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int i = 0; i < 4; ++i) pa[4 * kk + i] = pack2<T>(sacc[8 * kk + 2 * i], sacc[8 * kk + 2 * i + 1]);
    }
    return sum;
  };
  // Stores A fragments of P into the tile's rope block as a 64 x 64 K-major swizzled matrix (the
  // A operand of pv_from_smem) and makes them visible to the other warpgroup's wgmma.
  // Fragment 4 kk + i holds keys 16 kk + 8 (i / 2) + 2 (lane % 4) + {0, 1} of row r_lo (i even)
  // or r_hi (i odd); a warp's stores cover 8 rows x 16 bytes, one per bank.
  auto store_p = [&](int buf, const uint32_t (&pa)[16]) {
    unsigned char* block = tile_ptr(buf) + S::kRopeBlock;
#pragma unroll
    for (int f = 0; f < 16; ++f) {
      const int r = (f % 2) ? r_hi : r_lo, chunk = 2 * (f / 4) + (f % 4) / 2;
      *reinterpret_cast<uint32_t*>(block + sw128_offset(r, chunk) + (lane % 4) * 4) = pa[f];
    }
    fence_proxy_async_shared();
  };
  auto max_of = [](MlaRowPair a, MlaRowPair b) { return MlaRowPair{fmaxf(a.lo, b.lo), fmaxf(a.hi, b.hi)}; };
  // exp2(from - to) per row for running maxima moving from `from` to `to` (>= from); 1 while -inf.
  auto rescale = [](MlaRowPair from, MlaRowPair to) {
    auto f = [](float a, float b) { return b == -INFINITY ? 1.f : fast_exp2(a - b); };
    return MlaRowPair{f(from.lo, to.lo), f(from.hi, to.hi)};
  };
  // This thread's rows' maxima, for its twin in the other warpgroup (which waits on barrier `bar`).
  auto publish_max = [&](MlaRowPair mm, int bar) {
    my_max[0] = mm.lo;
    my_max[1] = mm.hi;
    named_barrier_arrive(bar, kComputeThreads);
  };
  auto scale_o = [&](float (&o)[128], MlaRowPair c) {
    if (__any_sync(0xffffffffu, c.lo != 1.f || c.hi != 1.f)) {
#pragma unroll
      for (int j = 0; j < 128; ++j) o[j] *= (j % 4) < 2 ? c.lo : c.hi;
    }
  };
  // A TMA tile is whole pages, so in a sequence's last tile the rows past kv_len hold whatever
  // the page holds there (maybe NaN, and 0 * NaN is NaN): this warpgroup zeroes those rows of its
  // V half before its product reads them. (Their scores are masked by value, so K may keep them;
  // cp.async tiles are zero-filled already.) Only the warpgroup itself reads its half as V.
  auto zero_v_tail = [&](int buf, int tile, int kv_len) {
    if constexpr (kTma) {
      const int first = kv_len - tile * kMlaWgKeys;  // >= 1: the tile starts before kv_len
      if (first >= kMlaWgKeys) return;
      unsigned char* half = tile_ptr(buf) + 4 * wg * S::kColBlockBytes;
      for (int c = tw; c < (kMlaWgKeys - first) * 32; c += 128) {  // (row, column block, 16 bytes)
        const int row = first + c / 32, cb = (c / 8) % 4, chunk = c % 8;
        *reinterpret_cast<int4*>(half + cb * S::kColBlockBytes + row * 128 + chunk * 16) = make_int4(0, 0, 0, 0);
      }
      fence_proxy_async_shared();
      named_barrier_sync(kBarOwn + wg, 128);
    }
  };
  auto settle_o = [&](float (&o)[128]) {
#pragma unroll
    for (int i = 0; i < 128; ++i) reg_fence(o[i]);
  };

  // Copies the 64 query rows of sequence b into shared memory with `threads` threads (rows past
  // the sequence's s_q x Hq read as 0); the caller waits for its cp.async group.
  auto load_queries = [&](int b, int t, int threads) {
    const int rows_per_pass = threads / 8;
    for (int r = t / 8; r < kMlaWgRows; r += rows_per_pass) {
      const bool live = row0 + r < rows_per_b;
      const int64_t g = int64_t(b) * rows_per_b + (live ? row0 + r : 0);
      unsigned char* dst = base + S::kQ + sw128_offset(r, ld_chunk);
      copy_row_chunk(dst, S::kColBlockBytes, q_nope + g * kMlaLatentDim + ld_chunk * 8,
                     q_pe + g * kMlaRopeDim + ld_chunk * 8, live);
    }
    cp_async_commit();
  };

  int uses[2] = {0, 0};      // tiles consumed from each buffer so far (mirrors the loader)
  bool q_in_flight = false;  // warpgroup 0 already issued this sequence's queries (see below)
  for (int b = first_b; b <= last_b; ++b) {
    const int kv_len = int(clamp_kv_len(p.kv_lens[b], capacity));
    const TileSpan tiles = tile_range(b, kv_len);
    // Both warpgroups are done with the previous sequence's queries and crossing buffers.
    named_barrier_sync(kBarCompute, kComputeThreads);
    if (!q_in_flight) load_queries(b, tid, kComputeThreads);
    cp_async_wait<0>();
    fence_proxy_async_shared();
    named_barrier_sync(kBarCompute, kComputeThreads);
    // Warpgroup 0 fetches the next sequence's queries before this one's epilogue (below).
    q_in_flight = tiles.begin < tiles.end && b < last_b;
    // Each row's visible keys end at row_end (causal rows see fewer). Rows past the sequence's
    // s_q x Hq are never stored; they see all keys so they do not force masking.
    auto row_end = [&](int r) -> int {
      if (row0 + r >= rows_per_b || !p.causal) return kv_len;
      return int(visible_keys(kv_len, p.s_q, (row0 + r) / p.num_heads, 0).end);
    };
    const int end_lo = row_end(r_lo), end_hi = row_end(r_hi);
    const int min_end = min(end_lo, end_hi);
    // Tile u needs masking when it reaches past some row's end in this warp.
    auto needs_mask = [&](int u) { return __any_sync(0xffffffffu, (u + 1) * kMlaWgKeys > min_end); };
    MlaRowPair m{-INFINITY, -INFINITY};  // running max (log2 domain) at the start of a pair
    MlaRowPair l{0.f, 0.f};              // this thread's share of the running sums
    bool bad = false;                    // a page id of this warpgroup's tiles was out of range
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;
    float sacc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) sacc[i] = 0.f;

    // Each warpgroup's first S; later ones are issued at the end of the previous pair.
    if (tiles.begin + wg < tiles.end) {
      // (buffer index as a constant in each branch: the group order depends on it)
      if (wg == 0) bad |= issue_scores(sacc, 0, uses[0] & 1);
      else bad |= issue_scores(sacc, 1, uses[1] & 1);
      wait_scores(sacc);
    }
    for (int u = tiles.begin; u < tiles.end; u += 2) {
      const bool has1 = u + 1 < tiles.end;
      const bool next0 = u + 2 < tiles.end, next1 = u + 3 < tiles.end;  // the next pair's tiles
      ++uses[0];
      if (has1) ++uses[1];
      uint32_t pa[16];  // this warpgroup's P as A fragments
      if (wg == 0) {
        const MlaRowPair m0 = max_of(m, tile_max(sacc, u, needs_mask(u), end_lo, end_hi));
        const MlaRowPair sum = probabilities(sacc, m0, pa);
        publish_max(m0, kBarM0);
        const MlaRowPair c = rescale(m, m0);
        l = {l.lo * c.lo + sum.lo, l.hi * c.hi + sum.hi};
        scale_o(o, c);
#pragma unroll
        for (int i = 0; i < 16; ++i) reg_fence(pa[i]);
        zero_v_tail(0, u, kv_len);
        wgmma_fence();
        pv_from_regs(o, pa, 0);  // O_L += P0 V0_L
        wgmma_commit();
        wgmma_wait<0>();
        settle_o(o);
        release(0, kGroupL);
        named_barrier_sync(kBarP1, kComputeThreads);  // warpgroup 1 published m1 and P1
        const MlaRowPair m1{peer_max[0], peer_max[1]};
        const MlaRowPair c1 = rescale(m0, m1);
        // P0 was made against m0; warpgroup 1 adds it to O_R, which is at m1.
        if (__any_sync(0xffffffffu, c1.lo != 1.f || c1.hi != 1.f)) {
#pragma unroll
          for (int i = 0; i < 16; ++i) pa[i] = scale_pack2<T>(pa[i], (i % 2) == 0 ? c1.lo : c1.hi);
        }
        store_p(0, pa);  // over K0's rope block: S0 is done with it
        named_barrier_arrive(kBarP0, kComputeThreads);
        l = {l.lo * c1.lo, l.hi * c1.hi};
        scale_o(o, c1);
        if (has1) {
          zero_v_tail(1, u + 1, kv_len);  // (warpgroup 1's S1 is done with it)
          wgmma_fence();
          pv_from_smem(o, 1);  // O_L += P1 V1_L
          wgmma_commit();
          // Buffer 1's L and rope go back to the loader before this warpgroup may block on the
          // next S0's refills: warpgroup 1's next S1 waits on them.
          wgmma_wait<0>();
          settle_o(o);
          release(1, kGroupL);
          release(1, kGroupRope);  // P1 was there
        }
        if (next0) bad |= issue_scores(sacc, 0, uses[0] & 1);
        wait_scores(sacc);
        m = m1;
      } else {
        MlaRowPair mx{-INFINITY, -INFINITY};
        if (has1) mx = tile_max(sacc, u + 1, needs_mask(u + 1), end_lo, end_hi);
        named_barrier_sync(kBarM0, kComputeThreads);  // warpgroup 0 published m0
        const MlaRowPair m1 = max_of(MlaRowPair{peer_max[0], peer_max[1]}, mx);
        MlaRowPair sum{0.f, 0.f};
        if (has1) {
          sum = probabilities(sacc, m1, pa);
          store_p(1, pa);  // over K1's rope block: S1 is done with it
        }
        publish_max(m1, kBarP1);
        const MlaRowPair c = rescale(m, m1);
        l = {l.lo * c.lo + sum.lo, l.hi * c.hi + sum.hi};
        scale_o(o, c);
        if (has1) {
#pragma unroll
          for (int i = 0; i < 16; ++i) reg_fence(pa[i]);
          zero_v_tail(1, u + 1, kv_len);
          wgmma_fence();
          pv_from_regs(o, pa, 1);  // O_R += P1 V1_R
          wgmma_commit();
        }
        named_barrier_sync(kBarP0, kComputeThreads);  // warpgroup 0 stored P0 at m1
        zero_v_tail(0, u, kv_len);                    // (warpgroup 0's S0 is done with it)
        wgmma_fence();
        pv_from_smem(o, 0);  // O_R += P0 V0_R
        wgmma_commit();
        if (has1) {
          wgmma_wait<1>();
          release(1, kGroupR);
        }
        wgmma_wait<0>();
        settle_o(o);
        release(0, kGroupR);
        release(0, kGroupRope);  // P0 was there
        if (next1) {
          bad |= issue_scores(sacc, 1, uses[1] & 1);
          wait_scores(sacc);
        }
        m = m1;
      }
    }

    // Warpgroup 0 passed the last pair's P1 barrier, so both warpgroups' last S is done: fetch
    // the next sequence's queries now, behind the epilogue (inside the pair loop the address
    // math made the compute warpgroups spill).
    if (wg == 0 && q_in_flight) load_queries(b + 1, tw, 128);

    // Epilogue: the row sums are the two warpgroups' shares (both against the same final max);
    // a corrupt page seen by either warpgroup poisons the whole sequence.
#pragma unroll
    for (int off = 1; off <= 2; off *= 2) {
      l.lo += JP_SHFL_XOR(l.lo, off);
      l.hi += JP_SHFL_XOR(l.hi, off);
    }
    sSum[wg * 256 + 2 * tw] = l.lo;
    sSum[wg * 256 + 2 * tw + 1] = l.hi;
    if (tw == 0) sBadWg[wg] = bad ? 1 : 0;
    named_barrier_sync(kBarCompute, kComputeThreads);
    const float sum_lo = l.lo + sSum[(1 - wg) * 256 + 2 * tw];
    const float sum_hi = l.hi + sSum[(1 - wg) * 256 + 2 * tw + 1];
    bad = (sBadWg[0] | sBadWg[1]) != 0;
    const bool whole = s.seq_pieces[b] == 1;
    const int slot = whole ? 0 : mla_piece_slot(s, part, b);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = half ? r_hi : r_lo;
      if (row0 + r >= rows_per_b) continue;
      const float sum = half ? sum_hi : sum_lo;
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const int64_t row = int64_t(b) * rows_per_b + row0 + r;
      const int64_t ws_row = int64_t(slot) * rows_per_b + row0 + r;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int col = 256 * wg + 8 * j + 2 * (lane % 4);
        const float x0 = bad ? NAN : o[4 * j + 2 * half] * inv;
        const float x1 = bad ? NAN : o[4 * j + 2 * half + 1] * inv;
        if (whole) {
          *reinterpret_cast<uint32_t*>(static_cast<T*>(p.out) + row * kMlaLatentDim + col) = pack2<T>(x0, x1);
        } else {
          *reinterpret_cast<float2*>(ws_out + ws_row * kMlaLatentDim + col) = make_float2(x0, x1);
        }
      }
      if (wg == 0 && lane % 4 == 0) {
        const float mrow = half ? m.hi : m.lo;
        const float lse = bad ? NAN : (sum > 0.f ? (mrow + __log2f(sum)) * kLn2 : -INFINITY);
        if (whole) p.lse[row] = lse;
        else ws_lse[ws_row] = lse;
      }
    }
  }
#endif
}

}  // namespace jaxpaged
