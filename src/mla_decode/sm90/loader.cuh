// The loader warpgroup of the MLA Hopper kernel (kernel.cuh): streams a partition's 64-token
// tiles into the two tile buffers, column group by column group, in the order the compute
// warpgroups hand them back (mla_group_in_order), each group behind its "empty" barrier and
// announced on its "full" one. 16-bit caches: page ids are read a pair of tiles ahead, each
// group's copies go straight into place (TMA or cp.async); fp8 caches: an issuing warp and
// three converting warps (mla_load_tiles_quantized); 656-byte rows: the whole warpgroup converts,
// the next refill's bytes in registers (mla_load_tiles_ds_regs; the split schedule's order).
#pragma once

#include "common/fp8.cuh"
#include "common/masking.h"
#include "common/sm80/mma.cuh"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/tma.cuh"
#include "mla_decode/partition_schedule.cuh"
#include "mla_decode/sm90/layout.cuh"
#include "mla_decode/sm90/tma_maps.h"
#include "mla_decode/sm90/trace.cuh"

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

// Whether a loader's table entry names cache rows: a sparse list's slot in [0, pool), a block
// table's page id in [0, num_pages) (pool unused).
template <bool kSparse>
__device__ __forceinline__ bool mla_entry_ok(const MlaDecodeParams& p, int32_t e, int64_t pool) {
  return kSparse ? e >= 0 && e < pool : e >= 0 && e < p.num_pages;
}

// TMA: one thread (the loader warpgroup's first) issues a box per 64-column block; a tile is a
// 64-row slice of one page (pages of >= 64 tokens). It also loads each sequence's queries (rows
// row0 .. row0 + 63 of the sequence's s_q x Hq), before that sequence's tiles: the first
// sequence's at once, so that they are asked for ahead of any tile (each block's first S needs
// its queries and its first tile, and at the start every block asks for them together); each
// later one when warpgroup 0 has released the last (q_empty: both compute warpgroups' last S of
// the sequence before is done), which comes before the refills of the new sequence's first pair.
__device__ __forceinline__ void mla_load_tiles_tma(const MlaDecodeParams& p, int page_shift, const MlaSchedule& s,
                                                   int part, int first_b, int last_b, int64_t capacity,
                                                   const MlaTmaMaps& maps, const MlaWgShared& sh, int row0) {
  using S = MlaWgSmem;
  unsigned char* base = sh.base;
  uint64_t* full = sh.full;
  uint64_t* empty = sh.empty;
  int* sBadPage = sh.sBadPage;
  // The 64-token tiles [begin, end) of sequence b this block processes.
  auto tile_range = [&](int b, int64_t kv_len) { return mla_piece_tiles(s, part, b, mla_tiles_of(kv_len)); };
  auto load_queries = [&](int b) {
    mbar_arrive_expect_tx(sh.q_full, S::kColBlocks * S::kColBlockBytes);  // 9 boxes of 64 x 64
#pragma unroll
    for (int cb = 0; cb < 8; ++cb) tma_load_3d(base + S::kQ + cb * S::kColBlockBytes, &maps.q_nope, cb * 64, row0, b, sh.q_full);
    tma_load_3d(base + S::kQ + 8 * S::kColBlockBytes, &maps.q_pe, 0, row0, b, sh.q_full);
  };
  if (first_b <= last_b) load_queries(first_b);
  tma_prefetch_map(&maps.ckv);
  tma_prefetch_map(&maps.kpe);
  MlaTrace tr(p, 2);
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
    // (this sequence's reads above are in flight while the loader waits for its queries' buffer)
    if (b > first_b) {
      mbar_wait(sh.q_empty, (b - first_b - 1) & 1);
      load_queries(b);
    }
    for (int u = tiles.begin; u < tiles.end; u += 2) {
      const bool has1 = u + 1 < tiles.end;
      const uint32_t parity0 = (uses0 & 1) ^ 1, parity1 = (uses1 & 1) ^ 1;
      ++uses0;
      if (has1) ++uses1;
#pragma unroll
      for (int step = 0; step < 2 * kGroups; ++step) {  // release order, as below
        const int buf = mla_refill_buf(step), g = mla_group_in_order(buf, mla_refill_order(step));
        if (buf == 1 && !has1) continue;
        const int t = u + buf;
        const int32_t page = buf ? pg1 : pg0;
        unsigned char* tile = base + S::kTile0 + buf * S::kTileBytes;
        uint64_t* bar = &full[buf * kGroups + g];
        mbar_wait(&empty[buf * kGroups + g], buf ? parity1 : parity0);
        tr(40 + step);
        if (mla_refill_order(step) == 0) sBadPage[buf * 4] = mla_entry_ok<false>(p, page, 0) ? 0 : 1;
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

// fp8 caches with a per-tensor scale (kMlaFp8; 656-byte rows take mla_load_tiles_ds_regs below,
// since session 30): a group's raw bytes are converted in place (shared memory
// has no room to stage them elsewhere), and the loader warpgroup splits into two roles so that no
// copy waits for a conversion and no conversion for a free slot (when one warpgroup did both, at
// most two groups were in flight and each waited for its bytes: NOTES item 42):
//   warp 0 (the issuer) waits for each group's slot in the order they fall free, as the 16-bit
//     loader does, issues the group's raw bytes by cp.async and goes on; their landing completes
//     the group's "landed" barrier. Where the raw bytes go: every row's within that row's own
//     bytes of the group's area, so a converting warp touches only its own rows - latent group g
//     (column blocks B..B+3, B = 4 g): token r's raw columns 0-127 at block B+2 + r * 128, 128-255
//     at block B+3 + r * 128; an fp8 rope's 64 bytes at the rope block + r * 128 + 64. A row
//     with no key is zero-filled.
//   warps 1-3 (converters) wait for each group's landed barrier in the same order, rewrite their
//     rows (row quads q = warp - 1, warp + 2, ... of the 16) as the tiles' type, swizzled, and
//     announce the group full. Each lane reads its raw chunk of row 4 q + lane / 8 before any lane
//     writes (a __syncwarp between), since a row's converted values overwrite its raw bytes.
// Values are converted exactly, to half (MlaTileT; the kernel applies kv_scale to S and O).
constexpr int kMlaConverterWarps = 3;  // the full barriers' count on this path

template <typename T, bool kSparse, int kFmt>
__device__ __forceinline__ void mla_load_tiles_quantized(const MlaDecodeParams& p, int page_shift,
                                                         const MlaSchedule& s, int part, int first_b, int last_b,
                                                         int64_t capacity, const MlaWgShared& sh, int tw, int lane) {
  static_assert(kFmt == kMlaFp8, "656-byte rows take mla_load_tiles_ds_regs");
  using S = MlaWgSmem;
  using Tc = MlaTileT<T, kFmt>;
  const int warp = tw / 32;
  const unsigned char* ckv8 = static_cast<const unsigned char*>(p.ckv);
  const unsigned char* kpe8 = static_cast<const unsigned char*>(p.kpe);
  const int64_t pool = p.num_pages * p.page_size;  // sparse: slots [0, pool) are keys
  int uses[2] = {0, 0};  // tiles loaded into each buffer so far (all sequences)
  for (int b = first_b; b <= last_b; ++b) {
    const int kv_len = mla_kv_len<kSparse>(p, b, capacity);
    const TileSpan tiles = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
    const int32_t* table = kSparse ? p.indices + int64_t(b) * p.topk : p.block_tables + int64_t(b) * p.max_pages;
    for (int u = tiles.begin; u < tiles.end; u += 2) {  // t0 of a pair in buffer 0, t1 in buffer 1
      const bool has1 = u + 1 < tiles.end;
      const uint32_t parity0 = uses[0] & 1, parity1 = uses[1] & 1;  // landed; a slot's empty: ^ 1
      ++uses[0];
      if (has1) ++uses[1];
      for (int step = 0; step < 2 * kGroups; ++step) {  // the order groups fall free (as the 16-bit loader)
        const int buf = mla_refill_buf(step), g = mla_group_in_order(buf, mla_refill_order(step));
        if (buf == 1 && !has1) continue;
        const int t = u + buf;
        const uint32_t parity = buf ? parity1 : parity0;
        unsigned char* tile = sh.tile(buf);
        uint64_t* landed = &sh.landed[buf * kGroups + g];
        if (warp == 0) {
          // The table entries of the tile's rows lane and lane + 32 (its first group only), read
          // before the slot's wait: their latency then overlaps it rather than following it.
          int32_t ent[2] = {-1, -1};
          if (mla_refill_order(step) == 0) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int j = t * kMlaWgKeys + lane + 32 * h;
              if (j < kv_len) ent[h] = table[kSparse ? j : (j >> page_shift)];
            }
          }
          mbar_wait(&sh.empty[buf * kGroups + g], parity ^ 1);
          // The tile's rows' byte offsets in the cache (-1: no key), parked in shared memory.
          int64_t* offs = reinterpret_cast<int64_t*>(sh.sPage) + buf * kMlaWgKeys;
          if (mla_refill_order(step) == 0) {
            // Checked once per tile, with its first group: -1 marks a row past kv_len or with an
            // out-of-range id (zero-filled). The corrupt-page flag travels with the first group
            // (a sparse list has none: such a slot is no key); sparse tiles also mark their keys.
            // (Quantized caches on this path are combined: the rope is in the same rows.)
            bool bad = false;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int row = lane + 32 * h, j = t * kMlaWgKeys + row;
              const bool in_seq = j < kv_len;
              const int32_t e = ent[h];
              const bool ok = mla_entry_ok<kSparse>(p, e, pool);
              bad |= !kSparse && in_seq && !ok;
              const int64_t at = kSparse ? int64_t(e) * p.ckv_slot_stride
                                         : int64_t(e) * p.ckv_page_stride + (j & int(p.page_size - 1)) * p.ckv_slot_stride;
              offs[row] = in_seq && ok ? at : -1;
              if (kSparse) sh.sKeyMask[buf * kMlaWgKeys + row] = in_seq && ok ? 1 : 0;
            }
            bad = gpu::any(bad);
            if (lane < 4) sh.sBadPage[buf * 4 + lane] = lane == 0 && bad ? 1 : 0;
            __syncwarp();  // (the offsets, for the other lanes' copies)
          }
          if (g != kGroupRope) {
            unsigned char* area = tile + 4 * g * S::kColBlockBytes;
            // 64 rows x 256 bytes: 16 lanes a row, lane chunk c of raw block k, rows 2 i + lane / 16
            const int k = (lane >> 3) & 1, c = lane & 7;
            unsigned char* dst = area + (2 + k) * S::kColBlockBytes + (lane >> 4) * 128 + 16 * c;
            const unsigned char* src = ckv8 + 256 * g + 128 * k + 16 * c;
#pragma unroll 8
            for (int i = 0; i < 32; ++i) {
              const int64_t at = offs[2 * i + (lane >> 4)];
              cp_async_16(dst + 256 * i, src + (at < 0 ? 0 : at), at >= 0);
            }
          } else {
            unsigned char* block = tile + 8 * S::kColBlockBytes;
#pragma unroll 8
            for (int i = 0; i < 8; ++i) {  // the fp8 rope (kpe's rows), raw: rows 8 i + lane / 4, chunk lane % 4
              const int row = 8 * i + (lane >> 2), c = lane & 3;
              const int64_t at = offs[row];
              cp_async_16(block + row * 128 + 64 + 16 * c, kpe8 + (at < 0 ? 0 : at) + 16 * c, at >= 0);
            }
          }
          mbar_arrive_on_cp_async(landed);  // (each lane: its copies landed + a plain arrival)
          mbar_arrive(landed);
        } else {
          mbar_wait(landed, parity);
          const int c = lane % 8;
          for (int q = warp - 1; q < kMlaWgKeys / 4; q += kMlaConverterWarps) {
            const int r = 4 * q + lane / 8;
            if (g != kGroupRope) {
              unsigned char* area = tile + 4 * g * S::kColBlockBytes;
              const uint4 raw0 = *reinterpret_cast<const uint4*>(area + 2 * S::kColBlockBytes + r * 128 + 16 * c);
              const uint4 raw1 = *reinterpret_cast<const uint4*>(area + 3 * S::kColBlockBytes + r * 128 + 16 * c);
              __syncwarp();  // the row's raw bytes are read before any lane overwrites them
              // Lanes c and c + 4 of a row write the same chunk positions of adjacent column
              // blocks (the same banks): the upper four convert their raw chunk's halves swapped
              // and store the second output chunk first, so each store instruction's eight lanes
              // of a row cover eight distinct bank groups.
              const bool swap = c >= 4;
#pragma unroll
              for (int k = 0; k < 2; ++k) {
                uint4 raw = k ? raw1 : raw0;
                if (swap) raw = make_uint4(raw.z, raw.w, raw.x, raw.y);
                uint4 first, second;
                fp8x16_to<Tc>(raw, first, second, p.kv_e5m2);
                const int col = 128 * k + 16 * c;  // the chunk's first column in the group
                unsigned char* block = area + (col / 64) * S::kColBlockBytes;
                const int ch = (col % 64) / 8;
                *reinterpret_cast<uint4*>(block + sw128_offset(r, ch + (swap ? 1 : 0))) = first;
                *reinterpret_cast<uint4*>(block + sw128_offset(r, ch + (swap ? 0 : 1))) = second;
              }
            } else {  // the fp8 rope
              unsigned char* block = tile + 8 * S::kColBlockBytes;
              const uint4 raw = c < 4 ? *reinterpret_cast<const uint4*>(block + r * 128 + 64 + 16 * c)
                                      : make_uint4(0, 0, 0, 0);
              __syncwarp();
              if (c < 4) {
                uint4 lo, hi;
                fp8x16_to<Tc>(raw, lo, hi, p.kv_e5m2);
                *reinterpret_cast<uint4*>(block + sw128_offset(r, 2 * c)) = lo;
                *reinterpret_cast<uint4*>(block + sw128_offset(r, 2 * c + 1)) = hi;
              }
            }
          }
          fence_proxy_async_shared();  // the stores, for the compute warpgroups' wgmma reads
          __syncwarp();
          if (lane == 0) mbar_arrive(&sh.full[buf * kGroups + g]);
        }
      }
    }
  }
}

// 656-byte rows (kMlaDsRows) through the loader's registers (session 30, NOTES item 51): the
// whole warpgroup converts, and holds the next group's raw bytes in registers while it waits for
// the slot of the group in hand, so no raw staging in shared memory and no land -> convert stage
// sits between a slot falling free and its refill (mla_load_tiles_quantized's exposed chain,
// NOTES item 43 a). It needs more registers than the staging loader (MlaWgRegs).
//   Thread tw takes one token of every tile - row warp * 16 + lane % 8 + 8 (lane / 16) - and a
//   half: quarter 2 g + half of latent group g (its 128 e4m3 values, their float32 scale) and
//   rope chunks 4 half .. 4 half + 3. Each 16-byte store instruction's eight-lane phases then
//   write eight consecutive rows of one chunk column: distinct swizzled slots, no bank conflict.
//   It feeds the split schedule (kernel.cuh: warpgroup 0 runs every tile's S, softmax and P V_L,
//   warpgroup 1 P V_R), which releases a tile's groups L (after P V_L), then R and rope (after
//   P V_R) and reads them in that order: the loader refills each tile's L, R, rope in turn,
//   tiles alternating buffers by pairs as elsewhere. Each refill's loads are issued one refill
//   ahead (the next pair's first from the last of this one), the table entries a pair ahead.
//   A row with no key (past kv_len, an out-of-range id) is zero-filled; every warp arrives on a
//   group's full barrier once its stores are fenced for the async proxy (kMlaDsRegsWarps).
constexpr int kMlaDsRegsWarps = 4;  // the full barriers' count on this path

struct MlaDsStepData {
  uint4 v[8];   // a latent quarter's 128 e4m3 values, or (v[0..3]) four rope chunks
  float scale;  // the quarter's group scale
};

template <typename T, bool kSparse>
__device__ __forceinline__ void mla_load_tiles_ds_regs(const MlaDecodeParams& p, int page_shift,
                                                       const MlaSchedule& s, int part, int first_b, int last_b,
                                                       int64_t capacity, const MlaWgShared& sh, int tw, int lane) {
  using S = MlaWgSmem;
  const int warp = tw / 32;
  const int row = warp * 16 + (lane & 7) + 8 * (lane >> 4);  // this thread's token of every tile
  const int half = (lane >> 3) & 1;
  const unsigned char* ckv8 = static_cast<const unsigned char*>(p.ckv);
  const int64_t pool = p.num_pages * p.page_size;  // sparse: slots [0, pool) are keys
  // A latent group's quarter (g: kGroupL or kGroupR) or the rope's half of a row at byte `at` of
  // the cache (-1: no key, zeros).
  auto load_latent = [&](int64_t at, int g, MlaDsStepData& d) {
    const int q = 2 * g + half;
    const unsigned char* src = ckv8 + (at < 0 ? 0 : at);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      d.v[i] = at < 0 ? make_uint4(0, 0, 0, 0) : __ldg(reinterpret_cast<const uint4*>(src + 128 * q + 16 * i));
    }
    d.scale = at < 0 ? 0.f : __ldg(reinterpret_cast<const float*>(src + kMlaDsScalesAt + 4 * q));
  };
  auto load_rope = [&](int64_t at, MlaDsStepData& d) {
    const unsigned char* src = ckv8 + (at < 0 ? 0 : at) + kMlaDsRopeAt + 64 * half;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      d.v[i] = at < 0 ? make_uint4(0, 0, 0, 0) : __ldg(reinterpret_cast<const uint4*>(src + 16 * i));
    }
  };
  auto store = [&](int buf, int g, const MlaDsStepData& d) {
    unsigned char* tile = sh.tile(buf);
    if (g == kGroupRope) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        *reinterpret_cast<uint4*>(tile + 8 * S::kColBlockBytes + sw128_offset(row, 4 * half + i)) = d.v[i];
      }
    } else {
      const int q = 2 * g + half;  // columns 128 q .. 128 q + 127: column blocks 2 q and 2 q + 1
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        uint4 lo, hi;
        fp8x16_scaled_to<T>(d.v[i], d.scale, lo, hi);
        unsigned char* block = tile + (2 * q + i / 4) * S::kColBlockBytes;
        *reinterpret_cast<uint4*>(block + sw128_offset(row, 2 * (i % 4))) = lo;
        *reinterpret_cast<uint4*>(block + sw128_offset(row, 2 * (i % 4) + 1)) = hi;
      }
    }
    fence_proxy_async_shared();  // the stores, for the compute warpgroups' wgmma reads
    __syncwarp();
    if (lane == 0) mbar_arrive(&sh.full[buf * kGroups + g]);
  };
  int uses[2] = {0, 0};  // tiles loaded into each buffer so far (all sequences)
  for (int b = first_b; b <= last_b; ++b) {
    const int kv_len = mla_kv_len<kSparse>(p, b, capacity);
    const TileSpan tiles = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
    if (tiles.begin >= tiles.end) continue;
    const int32_t* table = kSparse ? p.indices + int64_t(b) * p.topk : p.block_tables + int64_t(b) * p.max_pages;
    // Tile t's table entry for this thread's token (read only inside the sequence).
    auto entry = [&](int t) -> int32_t {
      const int j = t * kMlaWgKeys + row;
      return t < tiles.end && j < kv_len ? table[kSparse ? j : (j >> page_shift)] : -1;
    };
    // Its byte offset in the cache, -1 for no key; `bad`: a dense page id out of range inside
    // the sequence (the flag that makes the sequence's output NaN; a sparse list has none).
    auto offset_of = [&](int t, int32_t e, bool& bad) -> int64_t {
      const int j = t * kMlaWgKeys + row;
      const bool in_seq = t < tiles.end && j < kv_len;
      const bool ok = mla_entry_ok<kSparse>(p, e, pool);
      bad = !kSparse && in_seq && !ok;
      const int64_t at = kSparse ? int64_t(e) * p.ckv_slot_stride
                                 : int64_t(e) * p.ckv_page_stride + (j & int(p.page_size - 1)) * p.ckv_slot_stride;
      return in_seq && ok ? at : -1;
    };
    // The first pair's offsets and first step's bytes (once per sequence: exposed).
    bool bad0, bad1;
    int64_t off0 = offset_of(tiles.begin, entry(tiles.begin), bad0);
    int64_t off1 = offset_of(tiles.begin + 1, entry(tiles.begin + 1), bad1);
    MlaDsStepData cur, nxt;
    load_latent(off0, kGroupL, cur);
    for (int u = tiles.begin; u < tiles.end; u += 2) {  // t0 of a pair in buffer 0, t1 in buffer 1
      const bool has1 = u + 1 < tiles.end;
      const uint32_t parity0 = (uses[0] & 1) ^ 1, parity1 = (uses[1] & 1) ^ 1;  // the slots' empty phases
      ++uses[0];
      if (has1) ++uses[1];
      // The next pair's entries, a pair ahead of their use.
      const int32_t next_e0 = entry(u + 2), next_e1 = entry(u + 3);
      // A tile's first refill also publishes its key marks (sparse) and corrupt-page flag.
      auto mark = [&](int buf, int64_t off, bool bad) {
        if (kSparse && half == 0) sh.sKeyMask[buf * kMlaWgKeys + row] = off >= 0 ? 1 : 0;
        bad = gpu::any(bad);
        if (lane == 0) sh.sBadPage[buf * 4 + warp] = bad ? 1 : 0;
      };
      // A tile's refills, L (its first), R, rope, each issuing the loads of the one after; the
      // rope's, the next tile's L (`load_next`: nothing if there is none).
      auto refill_tile = [&](int buf, uint32_t parity, int64_t off, bool bad, auto load_next) {
        load_latent(off, kGroupR, nxt);
        mbar_wait(&sh.empty[buf * kGroups + kGroupL], parity);
        mark(buf, off, bad);
        store(buf, kGroupL, cur);
        cur = nxt;
        load_rope(off, nxt);
        mbar_wait(&sh.empty[buf * kGroups + kGroupR], parity);
        store(buf, kGroupR, cur);
        cur = nxt;
        load_next();
        mbar_wait(&sh.empty[buf * kGroups + kGroupRope], parity);
        store(buf, kGroupRope, cur);
        cur = nxt;
      };
      refill_tile(0, parity0, off0, bad0, [&] {
        if (has1) load_latent(off1, kGroupL, nxt);
      });
      if (has1) {  // then the next pair's offsets and first bytes
        refill_tile(1, parity1, off1, bad1, [&] {
          off0 = offset_of(u + 2, next_e0, bad0);
          off1 = offset_of(u + 3, next_e1, bad1);
          if (u + 2 < tiles.end) load_latent(off0, kGroupL, nxt);
        });
      }
    }
  }
}

// The gathering loader: the warpgroup's 128 threads gather a tile's rows (a small page's tile
// spans several pages; a sparse tile is any 64 tokens), thread tw taking chunk ld_chunk of
// tokens tw / 8 + 16 h, by 16-byte cp.async copies (16-bit caches; quantized ones take
// mla_load_tiles_quantized).
// kSparse: token j of list b is the slot indices[b * topk + j] (rows are page_size slots apart
// within a page and pages are page_size rows apart, so a slot is a row index); an out-of-range
// slot is no key (its row zero-filled, its id -1 for the compute warpgroups' mask), not a bad page.
template <typename T, bool kSparse>
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
  const int64_t pool = p.num_pages * p.page_size;  // sparse: slots [0, pool) are keys
  const int kv_row = tw / 8;  // tokens kv_row + 16 h (h < 4) of a tile
  int uses[2] = {0, 0};       // tiles loaded into each buffer so far (all sequences)
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
        const int buf = mla_refill_buf(step), g = mla_group_in_order(buf, mla_refill_order(step));
        if (buf == 1 && !has1) continue;
        const int t = u + buf;
        unsigned char* tile = base + S::kTile0 + buf * S::kTileBytes;
        int* page_ids = sPage + buf * 4 * 128;
        mbar_wait(&empty[buf * kGroups + g], buf ? parity1 : parity0);
        if (mla_refill_order(step) == 0) {
          // The tile's page ids (read during the previous pair) checked once and parked in
          // shared memory, so no registers hold them through its three groups: -1 marks a row
          // past kv_len or with an out-of-range id (zero-filled). The corrupt-page flags
          // travel with the tile's first group (a sparse list has none: such a slot is no key).
          // Sparse tiles also tell the compute warpgroups which tokens are keys (sKeyMask).
          bool bad = false;
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            const int32_t e = buf ? e1[h] : e0[h];
            const bool in_seq = t * kMlaWgKeys + kv_row + 16 * h < kv_len;
            const bool ok = mla_entry_ok<kSparse>(p, e, pool);
            bad |= !kSparse && in_seq && !ok;
            page_ids[h * 128 + tw] = in_seq && ok ? e : -1;
            if (kSparse && ld_chunk == 0) sh.sKeyMask[buf * 64 + kv_row + 16 * h] = in_seq && ok ? 1 : 0;
          }
          bad = gpu::any(bad);
          if (lane == 0) sBadPage[buf * 4 + tw / 32] = bad ? 1 : 0;
        }
        // Element offsets of this thread's rows; -1: none.
        auto row_at = [&](int h, int64_t page_stride, int64_t slot_stride) -> int64_t {
          const int32_t id = page_ids[h * 128 + tw];
          if (id < 0) return -1;
          if constexpr (kSparse) return int64_t(id) * slot_stride;
          const int slot = (t * kMlaWgKeys + kv_row + 16 * h) & int(p.page_size - 1);
          return int64_t(id) * page_stride + slot * slot_stride;
        };
#pragma unroll
        for (int h = 0; h < 4; ++h) {
          const int64_t at_ckv = row_at(h, p.ckv_page_stride, p.ckv_slot_stride);
          const int64_t at_kpe = row_at(h, p.kpe_page_stride, p.kpe_slot_stride);
          copy_row_chunk(tile + sw128_offset(kv_row + 16 * h, ld_chunk), S::kColBlockBytes,
                         ckv + (at_ckv < 0 ? 0 : at_ckv) + ld_chunk * 8, kpe + (at_kpe < 0 ? 0 : at_kpe) + ld_chunk * 8,
                         at_ckv >= 0, 4 * g, g == kGroupRope ? S::kColBlocks : 4 * g + 4);
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
