// The loader warpgroup of the MLA Hopper kernel (kernel.cuh): streams a partition's 64-token
// tiles into the two tile buffers, column group by column group, in the order the compute
// warpgroups hand them back (mla_group_in_order), each group behind its "empty" barrier and
// announced on its "full" one. Page ids are read a pair of tiles ahead.
#pragma once

#include "common/fp8.cuh"
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

// Quantized caches (kFmt != kMlaSame) reach a tile in two steps, because a group's fp8 bytes
// need converting and registers are scarce (56 per loader thread):
//  1. stage: cp.async copies the group's raw bytes into the upper part of the group's own area
//     (its bf16 columns are not read again until it is announced full): a latent group with
//     column blocks B..B+3 (B = 4 g) gets its 64 tokens' raw columns 0-127 in block B+2 and
//     128-255 in block B+3 (token r at r * 128), a 656-byte row's four scales in block B+1 (token
//     r at r * 16); an fp8 rope (kpe_fp8) gets its 64 bytes at 4096 + r * 64 of the rope block.
//     A row with no key is zero-filled. (656-byte rows' bf16 rope needs no converting: it is
//     copied straight into place, as a 16-bit cache's.)
//  2. convert (one group later, so the copies' latency hides behind the next group's issue, when
//     the next group's slot is already free; otherwise before waiting for that slot):
//     each loader thread reads its raw chunks into registers, the warpgroup meets, then writes
//     them as T into the swizzled bf16 layout. Latent groups do it in two phases (raw block B+2
//     into blocks B, B+1; then raw block B+3 into B+2, B+3), each read before a barrier and
//     written after it, so no thread overwrites raw bytes another has yet to read.
// kMlaFp8: values converted exactly (the kernel applies kv_scale to S and O); kMlaDsRows: each
// value times its group's scale, rounded to T (bf16).
constexpr int kMlaLoaderBar = 7;  // named barrier of the loader warpgroup (the compute ones use 1-6)
constexpr int kMlaRawRope = 4096;  // byte offset of a staged fp8 rope in the rope block
constexpr int kMlaLoaderFlag = 12;  // sBadPage's word where the loader shares a decision (layout.cuh: 16 words)

// Step 1 for this thread's chunk c of tile row r (row: the token's bytes, or nullptr; `any`: an
// address a zero-filling copy may name; rope: the token's kpe bytes for an fp8 rope).
template <int kFmt>
__device__ __forceinline__ void stage_quantized(unsigned char* tile, int g, int r, int c, const unsigned char* row,
                                                const unsigned char* any) {
  using S = MlaWgSmem;
  const bool valid = row != nullptr;
  if (g == kGroupRope) {
    unsigned char* block = tile + 8 * S::kColBlockBytes;
    if constexpr (kFmt == kMlaDsRows) {
      cp_async_16(block + sw128_offset(r, c), valid ? row + kMlaDsRopeAt + 16 * c : any, valid);
    } else if (c < 4) {
      cp_async_16(block + kMlaRawRope + r * 64 + 16 * c, valid ? row + 16 * c : any, valid);
    }
    return;
  }
  unsigned char* area = tile + 4 * g * S::kColBlockBytes;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    cp_async_16(area + (2 + k) * S::kColBlockBytes + r * 128 + 16 * c, valid ? row + 256 * g + 128 * k + 16 * c : any,
                valid);
  }
  if constexpr (kFmt == kMlaDsRows) {
    if (c == 0) cp_async_16(area + S::kColBlockBytes + r * 16, valid ? row + kMlaDsScalesAt : any, valid);
  }
}

// Step 2 for group g of tile (all 128 loader threads; this one's tile rows kv_row + 16 h, chunk
// c), once this thread's copies of it have landed (the caller waits for its cp.async group).
template <typename T, int kFmt>
__device__ __forceinline__ void convert_quantized(unsigned char* tile, int g, int kv_row, int c, bool e5m2) {
  using S = MlaWgSmem;
  named_barrier_sync(kMlaLoaderBar, 128);  // every thread's copies have landed
  uint4 raw[4];
  if (g == kGroupRope) {  // (only fp8 ropes get here)
    unsigned char* block = tile + 8 * S::kColBlockBytes;
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      raw[h] = c < 4 ? *reinterpret_cast<const uint4*>(block + kMlaRawRope + (kv_row + 16 * h) * 64 + 16 * c)
                     : make_uint4(0, 0, 0, 0);
    }
    named_barrier_sync(kMlaLoaderBar, 128);
    if (c < 4) {
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        uint4 lo, hi;
        fp8x16_to<T>(raw[h], lo, hi, e5m2);
        *reinterpret_cast<uint4*>(block + sw128_offset(kv_row + 16 * h, 2 * c)) = lo;
        *reinterpret_cast<uint4*>(block + sw128_offset(kv_row + 16 * h, 2 * c + 1)) = hi;
      }
    }
    return;
  }
  unsigned char* area = tile + 4 * g * S::kColBlockBytes;
  float2 sc[4];  // 656-byte rows: this group's two scales of each row (read before phase 0 writes)
#pragma unroll
  for (int k = 0; k < 2; ++k) {
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const int r = kv_row + 16 * h;
      raw[h] = *reinterpret_cast<const uint4*>(area + (2 + k) * S::kColBlockBytes + r * 128 + 16 * c);
      if constexpr (kFmt == kMlaDsRows) {
        if (k == 0) sc[h] = *reinterpret_cast<const float2*>(area + S::kColBlockBytes + r * 16 + 8 * g);
      }
    }
    named_barrier_sync(kMlaLoaderBar, 128);  // all reads of this phase's raw block are done
    const int col = 128 * k + 16 * c;         // first of the chunk's 16 columns in the group
    unsigned char* block = area + (col / 64) * S::kColBlockBytes;
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      uint4 lo, hi;
      if constexpr (kFmt == kMlaDsRows) {
        fp8x16_scaled_to<T>(raw[h], k ? sc[h].y : sc[h].x, lo, hi);
      } else {
        fp8x16_to<T>(raw[h], lo, hi, e5m2);
      }
      const int r = kv_row + 16 * h, chunk = (col % 64) / 8;
      *reinterpret_cast<uint4*>(block + sw128_offset(r, chunk)) = lo;
      *reinterpret_cast<uint4*>(block + sw128_offset(r, chunk + 1)) = hi;
    }
  }
}

// The gathering loader: the warpgroup's 128 threads gather a tile's rows (a small page's tile
// spans several pages; a sparse tile is any 64 tokens), thread tw taking chunk ld_chunk of
// tokens tw / 8 + 16 h. 16-bit caches: 16-byte cp.async copies. Quantized caches (kFmt, with
// mla_hopper_format): staged raw by cp.async, converted one group later (stage_quantized,
// convert_quantized).
// kSparse: token j of list b is the slot indices[b * topk + j] (rows are page_size slots apart
// within a page and pages are page_size rows apart, so a slot is a row index); an out-of-range
// slot is no key (its row zero-filled, its id -1 for the compute warpgroups' mask), not a bad page.
template <typename T, bool kSparse, int kFmt>
__device__ __forceinline__ void mla_load_tiles_gather(const MlaDecodeParams& p, int page_shift,
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
  const unsigned char* ckv8 = static_cast<const unsigned char*>(p.ckv);
  const unsigned char* kpe8 = static_cast<const unsigned char*>(p.kpe);
  const int64_t pool = p.num_pages * p.page_size;  // sparse: slots [0, pool) are keys
  const int kv_row = tw / 8;  // tokens kv_row + 16 h (h < 4) of a tile
  int uses[2] = {0, 0};       // tiles loaded into each buffer so far (all sequences)
  // Quantized caches: the staged group not yet converted (buffer * kGroups + group), or -1.
  int pending = -1;
  auto finish_pending = [&](bool newer_in_flight) {
    if (newer_in_flight) cp_async_wait<1>();
    else cp_async_wait<0>();
    const int buf = pending / kGroups, g = pending % kGroups;
    convert_quantized<T, kFmt>(base + S::kTile0 + buf * S::kTileBytes, g, kv_row, ld_chunk, p.kv_e5m2);
    fence_proxy_async_shared();  // the stores, for the compute warpgroups' wgmma reads
    mbar_arrive(&full[pending]);  // (both of this thread's arrivals: its copies have landed)
    mbar_arrive(&full[pending]);
    pending = -1;
  };
  for (int b = first_b; b <= last_b; ++b) {
    // 32-bit token positions (kv_lens are int32): fewer registers for the loader.
    const int kv_len = mla_kv_len<kSparse>(p, b, capacity);
    const TileSpan tiles = tile_range(b, kv_len);
    const int32_t* table = kSparse ? p.indices + int64_t(b) * p.topk : p.block_tables + int64_t(b) * p.max_pages;
    // A token's page id (dense) or slot (sparse); -1 past kv_len.
    auto entry = [&](int tile, int h) -> int32_t {
      const int j = tile * kMlaWgKeys + kv_row + 16 * h;
      if constexpr (kSparse) return j < kv_len ? table[j] : -1;
      return j < kv_len ? table[j >> page_shift] : 0;
    };
    // Page ids of this thread's four tokens in each tile of a pair, read a pair ahead.
    int32_t e0[4], e1[4];
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      e0[h] = kFmt == kMlaSame && tiles.begin < tiles.end ? entry(tiles.begin, h) : 0;
      e1[h] = kFmt == kMlaSame && tiles.begin + 1 < tiles.end ? entry(tiles.begin + 1, h) : 0;
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
        if (kFmt != kMlaSame && pending >= 0) {
          // Stage this group before converting the pending one only if its slot is free now:
          // waiting for it first could hold the pending group back from a compute warpgroup that
          // needs it before it releases this slot (then the warpgroups' overlap is lost). One
          // thread looks; the warpgroup decides together (the conversion has barriers).
          if (tw == 0) sh.sBadPage[kMlaLoaderFlag] = mbar_test(&empty[buf * kGroups + g], buf ? parity1 : parity0);
          named_barrier_sync(kMlaLoaderBar, 128);
          if (sh.sBadPage[kMlaLoaderFlag] == 0) finish_pending(false);
        }
        mbar_wait(&empty[buf * kGroups + g], buf ? parity1 : parity0);
        if (kOrder[step] == 0) {
          // The tile's page ids (read during the previous pair) checked once and parked in
          // shared memory, so no registers hold them through its three groups: -1 marks a row
          // past kv_len or with an out-of-range id (zero-filled). The corrupt-page flags
          // travel with the tile's first group (a sparse list has none: such a slot is no key).
          // Sparse tiles also tell the compute warpgroups which tokens are keys (sKeyMask).
          bool bad = false;
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            // (quantized caches: read now; registers for the ids a pair ahead made the loader spill)
            const int32_t e = kFmt != kMlaSame ? entry(t, h) : (buf ? e1[h] : e0[h]);
            const bool in_seq = t * kMlaWgKeys + kv_row + 16 * h < kv_len;
            const bool ok = kSparse ? e >= 0 && e < pool : e >= 0 && e < p.num_pages;
            bad |= !kSparse && in_seq && !ok;
            page_ids[h * 128 + tw] = in_seq && ok ? e : -1;
            if (kSparse && ld_chunk == 0) sh.sKeyMask[buf * 64 + kv_row + 16 * h] = in_seq && ok ? 1 : 0;
          }
          bad = gpu::any(bad);
          if (lane == 0) sBadPage[buf * 4 + tw / 32] = bad ? 1 : 0;
        }
        // Element (16-bit caches) or byte (quantized) offsets of this thread's rows; -1: none.
        auto row_at = [&](int h, int64_t page_stride, int64_t slot_stride) -> int64_t {
          const int32_t id = page_ids[h * 128 + tw];
          if (id < 0) return -1;
          if constexpr (kSparse) return int64_t(id) * slot_stride;
          const int slot = (t * kMlaWgKeys + kv_row + 16 * h) & int(p.page_size - 1);
          return int64_t(id) * page_stride + slot * slot_stride;
        };
        if constexpr (kFmt == kMlaSame) {
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            const int64_t at_ckv = row_at(h, p.ckv_page_stride, p.ckv_slot_stride);
            const int64_t at_kpe = row_at(h, p.kpe_page_stride, p.kpe_slot_stride);
            copy_row_chunk(tile + sw128_offset(kv_row + 16 * h, ld_chunk), S::kColBlockBytes,
                           ckv + (at_ckv < 0 ? 0 : at_ckv) + ld_chunk * 8, kpe + (at_kpe < 0 ? 0 : at_kpe) + ld_chunk * 8,
                           at_ckv >= 0, 4 * g, g == kGroupRope ? S::kColBlocks : 4 * g + 4);
          }
        } else {
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            // (an fp8 rope from kpe's rows; a 656-byte row's from the row itself)
            const bool fp8_rope = kFmt == kMlaFp8 && g == kGroupRope;
            const int64_t at = fp8_rope ? row_at(h, p.kpe_page_stride, p.kpe_slot_stride)
                                        : row_at(h, p.ckv_page_stride, p.ckv_slot_stride);
            stage_quantized<kFmt>(tile, g, kv_row + 16 * h, ld_chunk,
                                  at < 0 ? nullptr : (fp8_rope ? kpe8 : ckv8) + at, ckv8);
          }
          cp_async_commit();
          // The group staged before this one: converted and announced now.
          if (pending >= 0) finish_pending(true);
          if (kFmt == kMlaDsRows && g == kGroupRope) {  // (copied into place: no converting)
            mbar_arrive_on_cp_async(&full[buf * kGroups + g]);
            mbar_arrive(&full[buf * kGroups + g]);
          } else {
            pending = buf * kGroups + g;
          }
          continue;
        }
        mbar_arrive_on_cp_async(&full[buf * kGroups + g]);
        mbar_arrive(&full[buf * kGroups + g]);
      }
      // A pair of one tile ends on buffer 0's rope, whose S the next refill of buffer 0's L waits
      // for: convert it now rather than after that wait.
      if (!has1 && pending >= 0) finish_pending(false);
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        if (kFmt == kMlaSame && u + 2 < tiles.end) e0[h] = entry(u + 2, h);
        if (kFmt == kMlaSame && u + 3 < tiles.end) e1[h] = entry(u + 3, h);
      }
    }
  }
  if (pending >= 0) finish_pending(false);
}

}  // namespace jaxpaged
