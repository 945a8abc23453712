// The launcher of one tile-kernel instance (included by one generated translation unit per
// instance, sm80/tiles.cu.in): the KV split count, the tile list (unless a plan brings it), the
// kernel, the split merge.
#pragma once

#include <algorithm>

#include "common/combine_splits.h"
#include "common/gpu_launch.h"
#include "paged_attention/launch.h"
#include "paged_attention/sm80/tile_kernel.cuh"

namespace jaxpaged {

template <typename T, int D, bool LARGE, bool FP8, bool DTR>
ffi::Error launch_paged_tiles(const PagedAttentionParams& p, const PagedWorkspace& w, float* ws, const int32_t* plan,
                              gpuStream_t stream) {
  using C = TileConfig<D, LARGE, FP8, DTR>;
  const int64_t group = p.num_q_heads / p.num_kv_heads;
  const int64_t rows = p.num_tokens * p.num_q_heads;
  if (w.list_capacity >= kLargeTileFlag) {
    return ffi::Error::InvalidArgument("jaxpaged: paged_attention has more tiles than a tile word holds");
  }
  // The kernel addresses a key by its row of slot_stride elements in the pool as 32 bits (sRows in
  // tile_kernel.cuh): pools of 2^31 rows or more (over 128 GiB of 64-byte rows) are refused.
  if (p.slot_stride < 1 || p.page_stride % p.slot_stride != 0 || p.page_stride > 0x7FFFFFFF ||
      p.num_pages > 0x7FFFFFFF / (p.page_stride / p.slot_stride)) {
    return ffi::Error::InvalidArgument("jaxpaged: paged_attention's cache pool has 2^31 rows or more (the GPU "
                                       "tile kernel indexes them in 32 bits)");
  }
  // Pure decode knows its tile count (every sequence has `group` rows); a ragged call launches for
  // the list's capacity and blocks past the list's end return at once.
  const int64_t tiles = p.decode_only ? p.num_seqs * tiles_of_rows(group) : w.list_capacity;
  const int64_t blocks = tiles * p.num_kv_heads;
  if (DTR && !(p.decode_only && group <= 8)) {
    return ffi::Error::Internal("jaxpaged: the decode-transposed tile instance takes pure decode with GQA <= 8");
  }
  auto kernel = paged_tile_kernel<T, D, LARGE, FP8, DTR>;
  JP_RETURN_IF_ERROR(allow_smem(kernel, C::kSmemBytes, "paged_tile_kernel (shared memory size)"));
  const int64_t resident = resident_blocks(kernel, kTileThreads, C::kSmemBytes);
  // A ragged call's padding rows (owned by no sequence) are cleared by blocks after the tiles'
  // (at most one wave of them, kTileThreads / 32 rows at a time each).
  const int64_t pad_blocks =
      p.decode_only ? 0 : std::min<int64_t>((p.num_tokens + kPadRowsPerBlock - 1) / kPadRowsPerBlock, resident);
  if (blocks + pad_blocks > 0x7FFFFFFF) {
    return ffi::Error::InvalidArgument("jaxpaged: paged_attention needs more thread blocks than a grid holds (2^31 - 1)");
  }
  // (pure decode: its block count is exact, so a grid that already covers every SM in one wave
  // runs unsplit - choose_kv_splits)
  // (and, where the instance's stream rate is known, a grid whose blocks an SM cannot stream the
  // SM's bandwidth share runs in two nearly full waves - occupancy_kv_splits)
  const int device = p.decode_only ? current_device() : 0;
  const int splits = choose_kv_splits(blocks, w.split_cap, p.max_pages * p.page_size, 256, resident, 256,
                                      p.decode_only ? sm_count(device) : 0,
                                      p.decode_only && C::kBlockMbps > 0 ? memory_mbps(device) : 0, C::kBlockMbps);
  float* ws_out = w.split_out(ws);
  float* ws_lse = w.split_lse(ws, splits);
  // Pure decode needs no tile list (decode has no padding rows to clear): its blocks run in
  // sequence order when they all fit in one wave, and otherwise each block finds its sequence in
  // the list's longest-first order itself (up to kListFreeSeqs sequences). One kernel launch fewer
  // per call, and no wait for it (fp8 b64: 0.226 -> 0.217 ms per call; NOTES item 58). A call
  // with a plan reads the list the plan op made once for the step. kListFreeSeqs: where the
  // blocks' own search measured no slower than the list (NOTES item 59, S = 128-1024 sequences of
  // 16-512 keys or all 256): every block pays the search before its first load, and short blocks
  // feel it - bf16 varied lengths lose 8% at S = 256 (137 against 126 us), level at 128; fp8
  // varied level at 256, equal lengths (one reduction, no search) ahead everywhere (fp8 S = 256:
  // 79 against 89 us). Past the limit the list is kept.
  constexpr int64_t kListFreeSeqs = FP8 ? 256 : 128;
  static_assert(kListFreeSeqs <= kOrderMaxSeqs, "seq_in_length_order holds at most kOrderMaxSeqs lengths");
  const bool one_wave = blocks * splits <= resident;
  const bool direct = p.decode_only && (one_wave || (plan == nullptr && p.num_seqs <= kListFreeSeqs));
  const int by_length = direct && !one_wave ? 1 : 0;
  int32_t* own = reinterpret_cast<int32_t*>(ws);
  if (!direct && plan == nullptr) JP_RETURN_IF_ERROR(launch_paged_schedule(p, own, w.list_capacity, stream));
  const int32_t* work = direct ? nullptr : (plan != nullptr ? plan : own);
  // Dependent launches on Hopper: behind this call's own schedule kernel (which lets this one
  // launch at once; its blocks wait for it), and the split merge behind this kernel (launched as
  // its blocks exit): the launch gaps overlap. Not as a call's first kernel: behind another
  // kernel it gains nothing, and it measured slower per call on decode_b16_ctx2k (NOTES item 46).
  const bool dependent = dependent_launches();
  // The fp8 register path's tiles of at most 8 rows run transposed (tile_kernel.cuh, attend_tile's
  // TR) unless JAXPAGED_PAGED_TRANSPOSED=0 (paged_transposed_tiles; the DTR instance always does).
  JP_RETURN_IF_ERROR(launch_chained(dependent && work == own, "paged_tile_kernel", kernel,
                                    dim3(unsigned(blocks + pad_blocks), unsigned(splits)), dim3(kTileThreads),
                                    C::kSmemBytes, stream, p, page_shift_of(p.page_size), work, by_length,
                                    paged_transposed_tiles() ? 1 : 0, blocks, ws_out, ws_lse));
  if (splits == 1) return ffi::Error::Success();
  return launch_combine_splits<T>(ws_out, ws_lse, splits, rows, D, static_cast<T*>(p.out), p.lse, stream, dependent);
}

}  // namespace jaxpaged
