// The copy-engine loader of the fp8 kernels that compute on raw cache tiles (fp8_narrow.cuh,
// fp8_wide.cuh): one thread streams a partition's 64-token tiles, sequence by sequence, into a
// ring of raw buffers. Built for sm_90a only.
#pragma once

#include <cuda.h>  // CUtensorMap

#include "common/masking.h"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/tma.cuh"
#include "mla_decode/params.h"
#include "mla_decode/partition_schedule.cuh"
#include "mla_decode/sm90/loader.cuh"  // mla_entry_ok

namespace jaxpaged {

constexpr int kMlaRawBlock = 64 * 128;               // a column block of a raw tile: 64 tokens x 128 bytes
constexpr int kMlaRawBlocks = 5;                     // 4 latent + the rope block (its second half zero-filled)
constexpr int kMlaRawBytes = kMlaRawBlocks * kMlaRawBlock;

#if defined(JP_HAVE_WGMMA)
// Tile `use` (the block's running count of tiles, over its sequences) goes to buffer use % kStages
// at raw0 + (use % kStages) * kMlaRawBytes as five TMA boxes (64 tokens x 128 bytes, the 128-byte
// swizzle: the map's), after the buffer's `empty` barrier completes its previous phase; its landing
// completes full[use % kFull] (count 1: this thread's arrival with the bytes). kFull is kStages or a
// multiple of it, when several warpgroups each wait on their own barrier of a buffer (fp8_narrow.cuh
// says why). sBad[stage]: the tile's page id was out of range (the engine zero-fills a box outside
// the map; the compute side makes the sequence NaN). Call from one thread.
template <int kStages, int kFull>
__device__ __forceinline__ void mla_fp8_tma_ring(const MlaDecodeParams& p, int page_shift, const MlaSchedule& s,
                                                 int part, int first_b, int last_b, int64_t capacity,
                                                 const CUtensorMap* cache_map, unsigned char* raw0, uint64_t* full,
                                                 uint64_t* empty, int* sBad) {
  static_assert(kFull % kStages == 0, "a full barrier belongs to one buffer");
  tma_prefetch_map(cache_map);
  int use = 0;
  for (int b = first_b; b <= last_b; ++b) {
    const int kv_len = int(clamp_kv_len(p.kv_lens[b], capacity));
    const TileSpan tiles = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
    const int32_t* table = p.block_tables + int64_t(b) * p.max_pages;
    for (int u = tiles.begin; u < tiles.end; ++u, ++use) {
      // An out-of-range page id goes to the engine as it is (a box outside the map is
      // zero-filled) and the flag makes the sequence's output NaN.
      const int32_t page = table[(u * kMlaTileKeys) >> page_shift];
      const int stage = use % kStages;
      mbar_wait(&empty[stage], (uint32_t(use / kStages) & 1u) ^ 1u);
      sBad[stage] = mla_entry_ok<false>(p, page, 0) ? 0 : 1;
      const int slot = (u * kMlaTileKeys) & int(p.page_size - 1);
      unsigned char* raw = raw0 + stage * kMlaRawBytes;
      uint64_t* landed = &full[use % kFull];
      mbar_arrive_expect_tx(landed, kMlaRawBytes);
#pragma unroll
      for (int cb = 0; cb < kMlaRawBlocks; ++cb) {
        tma_load_3d(raw + cb * kMlaRawBlock, cache_map, cb * 128, slot, page, landed);
      }
    }
  }
}
#endif

}  // namespace jaxpaged
