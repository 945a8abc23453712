// The copy-engine loader of the fp8 kernels that compute on raw cache tiles (fp8_narrow.cuh,
// fp8_wide.cuh): one thread streams a partition's 64-token tiles, sequence by sequence, into a
// ring of raw buffers; for sparse lists of 656-byte rows, mla_ds_gather_ring (128 threads, a bulk
// copy a row).
// Built for sm_90a only.
#pragma once

#include <cuda.h>  // CUtensorMap

#include "common/masking.h"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/tma.cuh"
#include "mla_decode/params.h"
#include "mla_decode/partition_schedule.cuh"
#include "common/sm90/wgmma.cuh"  // sw128_offset, fence_proxy_async_shared
#include "mla_decode/sm90/loader.cuh"  // mla_entry_ok
#include "mla_decode/sm90/trace.cuh"

namespace jaxpaged {

constexpr int kMlaRawBlock = 64 * 128;               // a column block of a raw tile: 64 tokens x 128 bytes
constexpr int kMlaRawBlocks = 5;                     // 4 latent + the rope block (its second half zero-filled)
constexpr int kMlaRawBytes = kMlaRawBlocks * kMlaRawBlock;
// 656-byte rows (fp8_wide.cuh's kDs): the four latent blocks, then the rows' last 144 bytes (four
// float32 scales, 64 bf16 rope values) unswizzled, 144 bytes a token; buffers 42 KiB apart (so
// 1024-aligned; sparse lists keep a key byte per row in the 1 KiB past the copy engine's bytes).
constexpr int kMlaDsTailRow = 144;
constexpr int kMlaDsTileBytes = 4 * kMlaRawBlock + 64 * kMlaDsTailRow;  // 41984: what the copy engine brings
constexpr int kMlaDsRawBytes = 42 * 1024;
constexpr int kMlaDsKeyMaskAt = kMlaDsTileBytes;  // sparse lists: a byte a row, 1 = a key
static_assert(kMlaDsTileBytes == kMlaTileKeys * kMlaDsRowBytes, "a 656-row tile is its rows' bytes");

// Where a token's bytes lie in a raw tile. kRows = false, the copy engine's boxes of pages
// (mla_fp8_tma_ring): the latent in four 128-byte-swizzled column blocks of 64 tokens (the rope's
// fifth block; kDs: the 144-byte tails unswizzled after them). kRows = true, sparse lists of
// 656-byte rows (mla_ds_gather_ring): the rows as they are, 656 bytes apart - 41 x 16, an odd
// number of 16-byte units, so the eight rows an ldmatrix reads at one column fall in eight distinct
// bank groups without a swizzle. Offsets in bytes from the tile's start; col a multiple of 16.
template <bool kRows>
struct MlaRawTile {
  static __device__ __forceinline__ uint32_t latent(int t, int col) {
    if constexpr (kRows) return uint32_t(t * kMlaDsRowBytes + col);
    else return uint32_t((col / 128) * kMlaRawBlock + sw128_offset(t, (col % 128) / 16));
  }
  // kDs: token t's tail (four float32 scales, then 64 bf16 rope values)
  static __device__ __forceinline__ uint32_t tail(int t) {
    if constexpr (kRows) return uint32_t(t * kMlaDsRowBytes + kMlaDsScalesAt);
    else return uint32_t(4 * kMlaRawBlock + t * kMlaDsTailRow);
  }
  static constexpr int kTailStride = kRows ? kMlaDsRowBytes : kMlaDsTailRow;  // bytes from a tail to the next
};

#if defined(JP_HAVE_WGMMA)
// Tile `use` (the block's running count of tiles, over its sequences) goes to buffer use % kStages
// at raw0 + (use % kStages) * kMlaRawBytes (kDs: kMlaDsRawBytes) as five TMA boxes (64 tokens x
// 128 bytes, the 128-byte swizzle: the map's; kDs: four latent boxes and the 144-byte tail box),
// after the buffer's `empty` barrier completes its previous phase; its landing
// completes full[use % kFull] (count 1: this thread's arrival with the bytes; kHalves: below, two
// barriers a buffer, one per half). kFull is kStages or a
// multiple of it, when several warpgroups each wait on their own barrier of a buffer (fp8_narrow.cuh
// says why). sBad[stage]: the tile's page id was out of range (the engine zero-fills a box outside
// the map; the compute side makes the sequence NaN). Call from one thread.
// kDs: 656-byte rows - cache_map brings the four latent boxes, tail_map the 144-byte rest of each
// row, and buffers are kMlaDsRawBytes apart.
// kHalves (the wide kernel's kDF): each buffer has two full barriers, full[2 stage] for its first half
// (latent blocks 0-1, and kDs: the tails, whose scales and rope its S^T reads first) and
// full[2 stage + 1] for the rest, issued in that order, so that S^T may start on the first half
// while the second lands (kFull: 2 kStages).
template <int kStages, int kFull, bool kDs = false, bool kHalves = false>
__device__ __forceinline__ void mla_fp8_tma_ring(const MlaDecodeParams& p, int page_shift, const MlaSchedule& s,
                                                 int part, int first_b, int last_b, int64_t capacity,
                                                 const CUtensorMap* cache_map, unsigned char* raw0, uint64_t* full,
                                                 uint64_t* empty, int* sBad, const CUtensorMap* tail_map = nullptr) {
  constexpr int kStride = kDs ? kMlaDsRawBytes : kMlaRawBytes;
  if constexpr (kDs) tma_prefetch_map(tail_map);
  static_assert(kFull % kStages == 0, "a full barrier belongs to one buffer");
  static_assert(!kHalves || kFull == 2 * kStages, "two full barriers a buffer");
  tma_prefetch_map(cache_map);
  // The timeline probe's marks (trace.cuh: only in tools/mla_trace.cu's build; role 2): 90 start,
  // 91 a sequence, 92 / 94 a tile's empty wait passed and 93 / 95 its copies issued (tile 0 / 1 of
  // the wide kernel's pair: fp8_wide.cuh's 60-82).
  MlaTrace tr(p, 2);
  tr(90);
  int use = 0;
  for (int b = first_b; b <= last_b; ++b) {
    const int kv_len = int(clamp_kv_len(p.kv_lens[b], capacity));
    const TileSpan tiles = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
    const int32_t* table = p.block_tables + int64_t(b) * p.max_pages;
    tr(91);
    for (int u = tiles.begin; u < tiles.end; ++u, ++use) {
      const int mark = 92 + 2 * ((u - tiles.begin) & 1);
      // An out-of-range page id goes to the engine as it is (a box outside the map is
      // zero-filled) and the flag makes the sequence's output NaN.
      const int32_t page = table[(u * kMlaTileKeys) >> page_shift];
      const int stage = use % kStages;
      mbar_wait(&empty[stage], (uint32_t(use / kStages) & 1u) ^ 1u);
      tr(mark);
      sBad[stage] = mla_entry_ok<false>(p, page, 0) ? 0 : 1;
      const int slot = (u * kMlaTileKeys) & int(p.page_size - 1);
      unsigned char* raw = raw0 + stage * kStride;
      // (kHalves: the buffer's first half's barrier; the rest's is the next)
      uint64_t* landed = kHalves ? &full[2 * stage] : &full[use % kFull];
      if constexpr (kHalves) {
        uint64_t* first = landed;
        uint64_t* rest = landed + 1;
        mbar_arrive_expect_tx(first, 2 * kMlaRawBlock + (kDs ? 64 * kMlaDsTailRow : 0));
        for (int cb = 0; cb < 2; ++cb) tma_load_3d(raw + cb * kMlaRawBlock, cache_map, cb * 128, slot, page, first);
        if constexpr (kDs) tma_load_3d(raw + 4 * kMlaRawBlock, tail_map, kMlaDsScalesAt, slot, page, first);
        constexpr int kRest = kDs ? 2 : kMlaRawBlocks - 2;
        mbar_arrive_expect_tx(rest, kRest * kMlaRawBlock);
#pragma unroll
        for (int cb = 2; cb < 2 + kRest; ++cb) tma_load_3d(raw + cb * kMlaRawBlock, cache_map, cb * 128, slot, page, rest);
      } else if constexpr (kDs) {
        mbar_arrive_expect_tx(landed, kMlaDsTileBytes);
#pragma unroll
        for (int cb = 0; cb < 4; ++cb) tma_load_3d(raw + cb * kMlaRawBlock, cache_map, cb * 128, slot, page, landed);
        tma_load_3d(raw + 4 * kMlaRawBlock, tail_map, kMlaDsScalesAt, slot, page, landed);
      } else {
        mbar_arrive_expect_tx(landed, kMlaRawBytes);
#pragma unroll
        for (int cb = 0; cb < kMlaRawBlocks; ++cb) {
          tma_load_3d(raw + cb * kMlaRawBlock, cache_map, cb * 128, slot, page, landed);
        }
      }
      tr(mark + 1);
    }
  }
}

// Sparse index lists of 656-byte rows (fp8_wide.cuh's kDs with kSparse): the loader warpgroup's
// 128 threads gather each 64-entry tile of a list as MlaRawTile<true> lays it out (the rows as they
// are), two threads a row: the even one copies the whole row by one bulk copy (the copy engine's),
// the odd one only arrives (a row in two copies of half each measured 4-5% slower, NOTES item 69).
// An entry past the list's length, negative or past the pool (num_pages x page_size slots) is no
// key: its row is zero-filled by the even thread (the cache is not read for it) and its byte of
// kMlaDsKeyMaskAt is 0. full[stage] counts 128 arrivals, each thread's (the copy's bytes expected
// with it) after its mask and sBad stores. A tile's buffer is refilled once empty[stage] completes
// (the compute side has the last of its values in registers). Call from all 128 threads
// (tw = 0..127). Timeline marks (thread 0's, as mla_fp8_tma_ring's): 90, 91, 92 / 94 a tile's
// empty wait passed, 93 / 95 thread 0's copy issued.
template <int kStages>
__device__ __forceinline__ void mla_ds_gather_ring(const MlaDecodeParams& p, const MlaSchedule& s, int part,
                                                   int first_b, int last_b, int64_t capacity, unsigned char* raw0,
                                                   uint64_t* full, uint64_t* empty, int* sBad,
                                                   int tw) {
  const unsigned char* ckv8 = static_cast<const unsigned char*>(p.ckv);
  const int64_t pool = p.num_pages * p.page_size;
  const int row = tw / 2;
  const bool copier = tw % 2 == 0;
  bool zeroed = false;  // this thread has written a row of some buffer with plain stores
  MlaTrace tr(p, 2);
  tr(90);
  int use = 0;
  for (int b = first_b; b <= last_b; ++b) {
    const int kv_len = mla_kv_len<true>(p, b, capacity);
    const TileSpan tiles = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
    const int32_t* table = p.indices + int64_t(b) * p.topk;
    tr(91);
    // This thread's row's entry of the next tile, read a tile ahead (its latency then overlaps
    // the copies and the slot's wait rather than following them).
    auto entry = [&](int u) -> int32_t {
      const int j = u * kMlaTileKeys + row;
      return u < tiles.end && j < kv_len ? table[j] : -1;
    };
    int32_t e_next = entry(tiles.begin);
    for (int u = tiles.begin; u < tiles.end; ++u, ++use) {
      const int32_t e = e_next;  // (-1 past the list: entry() checked the row against kv_len)
      e_next = entry(u + 1);
      const bool ok = mla_entry_ok<true>(p, e, pool);
      const int stage = use % kStages;
      const int mark = 92 + 2 * ((u - tiles.begin) & 1);
      mbar_wait(&empty[stage], (uint32_t(use / kStages) & 1u) ^ 1u);
      tr(mark);
      unsigned char* raw = raw0 + stage * kMlaDsRawBytes;
      unsigned char* dst = raw + MlaRawTile<true>::latent(row, 0);
      if (copier) raw[kMlaDsKeyMaskAt + row] = ok ? 1 : 0;
      if (tw == 0) sBad[stage] = 0;  // (a list has no bad page: such an entry is no key)
      if (!copier) {
        mbar_arrive(&full[stage]);
      } else if (ok) {
        // (plain stores of this thread's earlier zero-fills ordered before the copy engine's writes;
        // the compute side's reads of the buffer are ordered by the empty barriers, as for TMA)
        if (zeroed) fence_proxy_async_shared(), zeroed = false;
        mbar_arrive_expect_tx(&full[stage], kMlaDsRowBytes);
        bulk_load(dst, ckv8 + int64_t(e) * p.ckv_slot_stride, kMlaDsRowBytes, &full[stage]);
      } else {
        for (int i = 0; i < kMlaDsRowBytes; i += 16) *reinterpret_cast<uint4*>(dst + i) = make_uint4(0, 0, 0, 0);
        zeroed = true;
        mbar_arrive(&full[stage]);
      }
      tr(mark + 1);
    }
  }
}
#endif

}  // namespace jaxpaged
