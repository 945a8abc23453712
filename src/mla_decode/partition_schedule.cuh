// Device-side work split of an MLA-decode call for the Hopper kernel (sm90/kernel.cuh), computed
// from kv_lens on the GPU every call (the host never reads lengths; the call stays graph-capturable)
// by mla_schedule_kernel (schedule.cu). This header holds what the kernels share of it.
//
// All sequences' 64-token KV tiles are laid end to end, each sequence preceded by kMlaSeqCost units
// of fixed cost (query load, epilogue), and the line is cut into `num_parts` equal spans (for a
// batch of equal lengths, spans of whole sequences when that costs at most 1/8 more). One
// partition = one span = row_blocks thread blocks (one per 64 query rows) that walk it in order:
// the tail of one sequence, whole sequences, the head of another. A sequence cut by span borders is
// finished by mla_merge_pieces_kernel from its pieces' partial outputs and lse; an uncut one is
// written straight to the output. Long and short sequences thus cost the same per key, and a batch
// of one long sequence is spread over the whole GPU.
//
// Partial results: a partition has at most two cut sequences, its first and its last, so piece
// slots are 2 * partition (first) and 2 * partition + 1 (last).
#pragma once

#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "mla_decode/params.h"
#include "mla_decode/workspace.h"

namespace jaxpaged {

// Tiles of a sequence of kv_len cached tokens (kv_len already clamped to its pages).
__device__ __forceinline__ int mla_tiles_of(int64_t kv_len) {
  return int((kv_len + kMlaTileKeys - 1) / kMlaTileKeys);
}
// Keys of sequence b: a dense sequence's kv_len clamped to its pages (capacity = max_pages *
// page_size); a sparse list's length (MlaDecodeParams::indices), at most topk (< 2^31).
template <bool kSparse>
__device__ __forceinline__ int mla_kv_len(const MlaDecodeParams& p, int64_t b, int64_t capacity) {
  if constexpr (kSparse) {
    // (32-bit division: a 64-bit one is a called routine, and its branches made ptxas serialize
    // the kernel's wgmma: C7520)
    const int64_t n = p.topk_lens == nullptr ? p.topk : p.topk_lens[int(b) / int(p.lens_every)];
    return int(n < 0 ? 0 : (n > p.topk ? p.topk : n));
  } else {
    return int(clamp_kv_len(p.kv_lens[b], capacity));
  }
}
__device__ __forceinline__ int mla_seq_tiles(const MlaDecodeParams& p, int64_t b) {
  const int64_t capacity = p.max_pages * p.page_size;
  return mla_tiles_of(p.sparse ? mla_kv_len<true>(p, b, capacity) : mla_kv_len<false>(p, b, capacity));
}

// The tiles [begin, end) of sequence b that partition `part` processes.
struct TileSpan {
  int begin, end;
};
__device__ __forceinline__ TileSpan mla_piece_tiles(const MlaSchedule& s, int part, int b, int tiles) {
  const int target = s.header[0], total = s.header[1];
  const int first_tile_pos = s.seq_start[b] + kMlaSeqCost;
  const int span_begin = part * target;
  const int span_end = min(total, (part + 1) * target);
  auto clamp_tiles = [&](int pos) { return max(0, min(tiles, pos - first_tile_pos)); };
  return {clamp_tiles(span_begin), clamp_tiles(span_end)};
}

// Where a cut sequence's piece from `part` keeps its partial result.
__device__ __forceinline__ int mla_piece_slot(const MlaSchedule& s, int part, int b) {
  return 2 * part + (s.part_first[part] == b ? 0 : 1);
}

}  // namespace jaxpaged
