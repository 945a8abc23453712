// The loader warpgroup of the MLA Hopper kernel (kernel.cuh): streams a partition's 64-token
// tiles into the two tile buffers, column group by column group, in the order the compute
// warpgroups hand them back (mla_group_in_order), each group behind its "empty" barrier and
// announced on its "full" one. Page ids are read a pair of tiles ahead.
#pragma once

#include "common/masking.h"
#include "common/sm80/mma.cuh"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/tma.cuh"
#include "mla_decode/partition_schedule.cuh"
#include "mla_decode/sm90/layout.cuh"
#include "mla_decode/sm90/tma_maps.h"

namespace jaxpaged {

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

// TMA: one thread (the loader warpgroup's first) issues a box per 64-column block; a tile is a
// 64-row slice of one page (pages of >= 64 tokens).
__device__ __forceinline__ void mla_load_tiles_tma(const MlaDecodeParams& p, int page_shift, const MlaSchedule& s,
                                                   int part, int first_b, int last_b, int64_t capacity,
                                                   const MlaTmaMaps& maps, const MlaWgShared& sh) {
  using S = MlaWgSmem;
  unsigned char* base = sh.base;
  uint64_t* full = sh.full;
  uint64_t* empty = sh.empty;
  int* sBadPage = sh.sBadPage;
  // The 64-token tiles [begin, end) of sequence b this block processes.
  auto tile_range = [&](int b, int64_t kv_len) { return mla_piece_tiles(s, part, b, mla_tiles_of(kv_len)); };
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
}

// cp.async: the warpgroup's 128 threads gather a tile's rows (a small page's tile spans several
// pages), 16 bytes per copy; thread tw copies chunk ld_chunk of tokens tw / 8 + 16 h.
template <typename T>
__device__ __forceinline__ void mla_load_tiles_cp_async(const MlaDecodeParams& p, int page_shift,
                                                        const MlaSchedule& s, int part, int first_b,
                                                        int last_b, int64_t capacity, const MlaWgShared& sh,
                                                        int tw, int lane, int ld_chunk) {
  using S = MlaWgSmem;
  unsigned char* base = sh.base;
  uint64_t* full = sh.full;
  uint64_t* empty = sh.empty;
  int* sBadPage = sh.sBadPage;
  int* sPage = sh.sPage;
  // The 64-token tiles [begin, end) of sequence b this block processes.
  auto tile_range = [&](int b, int64_t kv_len) { return mla_piece_tiles(s, part, b, mla_tiles_of(kv_len)); };
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
          bad = gpu::any(bad);
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
}

}  // namespace jaxpaged
