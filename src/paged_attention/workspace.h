// The GPU workspace of one paged-attention call: its one definition, used by the handler to carve
// it and by jaxpaged (through the extension's workspace-size function) to allocate it at lowering,
// so Python mirrors no size.
//
// Layout (float32 words): the tile list (int32: a two-word header, then (seq, tile word) pairs;
// tile_schedule.cuh; unused when the call has a plan or runs pure decode without a list), then, when
// rows may be split over several blocks, the splits' partial outputs [split_cap][rows][D] and lse
// [split_cap][rows].
#pragma once

#include <cstdint>

#include "common/host_device.h"
#include "common/kv_splits.h"
#include "paged_attention/params.h"

namespace jaxpaged {

// Tile shapes (tile_kernel.cuh), shared with the schedule and the workspace.
constexpr int kSmallRows = 16;           // rows of a decode tile
constexpr int kLargeRows = 64;           // rows of a prefill tile
constexpr int kLargeTileFlag = 1 << 30;  // set in a work entry's tile word for a large tile

// A sequence's query chunk of `rows` rows (q_len x group) is cut into large tiles when it has more
// than one small tile's worth, else it gets one small tile (none when it has no rows).
JP_HOST_DEVICE bool is_large_tile(int64_t rows) { return rows > kSmallRows; }
JP_HOST_DEVICE int64_t tiles_of_rows(int64_t rows) {
  return rows <= 0 ? 0 : (is_large_tile(rows) ? (rows + kLargeRows - 1) / kLargeRows : 1);
}

// Entries of a call's tile list: a sequence has ceil(rows / 64) large tiles or one small tile, so
// at most num_tokens * group / 64 + num_seqs in all (cu_q_lens clamped and non-decreasing).
JP_HOST_DEVICE int64_t paged_list_capacity(int64_t num_tokens, int64_t group, int64_t num_seqs) {
  return (num_tokens * group + kLargeRows - 1) / kLargeRows + num_seqs;
}
// int32 words of the list with its two-word header: also the size of a plan
// (jaxpaged.paged_attention_plan), which is such a list made once for many calls.
JP_HOST_DEVICE int64_t paged_plan_ints(int64_t num_tokens, int64_t group, int64_t num_seqs) {
  return 2 * (paged_list_capacity(num_tokens, group, num_seqs) + 1);
}

struct PagedWorkspace {
  int64_t list_capacity;  // work entries the tile list holds
  int64_t list_floats;    // words of the list with its header
  int split_cap;          // KV splits the partial results have room for (1: none allocated)
  int64_t rows, dim;      // output rows (tokens x query heads) and head dim of the partial results
  int64_t floats;         // the whole workspace

  // Where a call with `splits` KV splits keeps its partial outputs and their lse.
  float* split_out(float* ws) const { return ws + list_floats; }
  float* split_lse(float* ws, int splits) const { return split_out(ws) + int64_t(splits) * rows * dim; }

  // Only the shapes in p are read (the pointers may be null).
  static PagedWorkspace of(const PagedAttentionParams& p) {
    PagedWorkspace w;
    const int64_t group = p.num_kv_heads > 0 ? p.num_q_heads / p.num_kv_heads : 0;
    w.list_capacity = paged_list_capacity(p.num_tokens, group, p.num_seqs);
    w.list_floats = paged_plan_ints(p.num_tokens, group, p.num_seqs);
    w.split_cap = kv_split_cap(p.num_tokens * p.num_kv_heads, p.max_pages * p.page_size);
    w.rows = p.num_tokens * p.num_q_heads;
    w.dim = p.head_dim;
    w.floats = w.list_floats + (w.split_cap > 1 ? w.split_cap * w.rows * (w.dim + 1) : 0);
    return w;
  }
};

}  // namespace jaxpaged
