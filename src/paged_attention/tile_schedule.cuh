// The device-side schedule of a paged-attention call, computed from kv_lens and cu_q_lens on the
// GPU so the host never reads them (the call stays graph-capturable). One block lists the work
// items of tile_kernel.cuh, either for one call (into its workspace) or once for many calls
// (jaxpaged.paged_attention_plan: a serving step's layers share one list).
//
// A sequence whose query chunk has more than kSmallRows rows (q_len x group) is cut into large
// tiles; the others get one small tile. Small tiles are ordered by KV length, longest first (a
// counting sort over 256 length buckets): the hardware hands out blocks in order, so the long ones
// start early and the short ones fill the tail (longest-processing-time-first). The attention
// kernel spreads the large tiles evenly among the small ones (see tile_at), so compute-heavy
// prefill tiles run beside bandwidth-heavy decode tiles instead of in a phase of their own.
// Which tiles exist depends on cu_q_lens alone; kv_lens only order them, so a list made from other
// kv_lens (same cu_q_lens) still covers every row, with the same results.
// (Padding rows - rows of q that no sequence owns - are cleared by the attention kernel's extra
// blocks: clear_padding_rows in tile_kernel.cuh.)
//
// Work list layout (int32): [0] number of large tiles, [1] number of tiles, then (seq, tile word)
// pairs, large tiles first; the tile word carries kLargeTileFlag for a large tile.
#pragma once

#include "common/block_scan.cuh"
#include "common/gpu_math.cuh"
#include "common/pdl.cuh"
#include "common/masking.h"
#include "paged_attention/length_order.cuh"
#include "paged_attention/params.h"
#include "paged_attention/workspace.h"

namespace jaxpaged {

constexpr int kScheduleThreads = 256;

// One block. Reads kv_lens, cu_q_lens (unless decode_only) and the shapes of p; writes `work`
// (work_cap entries after the header).
__global__ void __launch_bounds__(kScheduleThreads)
    paged_tile_schedule_kernel(const PagedAttentionParams p, int32_t* __restrict__ work, int64_t work_cap) {
  // The tile kernel after it (a dependent launch on Hopper) may start now; it waits for this
  // kernel's list before reading it.
  pdl_launch_dependents();
  const int64_t S = p.num_seqs, num_tokens = p.num_tokens;
  const int tid = threadIdx.x;
  const int64_t group = p.num_q_heads / p.num_kv_heads;
  const int64_t capacity = p.max_pages * p.page_size;
  auto cu_at = [&](int64_t i) { return p.decode_only ? i : clamped_cu(p.cu_q_lens, i, num_tokens); };
  auto tiles_of = [&](int64_t s, bool* large) -> int64_t {
    const int64_t q_len = cu_at(s + 1) - cu_at(s);
    const int64_t rows = q_len > 0 ? q_len * group : 0;
    *large = is_large_tile(rows);
    return tiles_of_rows(rows);
  };
  int32_t* list = work + 2;

  static_assert(kLengthBuckets == kScheduleThreads, "one length bucket per thread in the scan");
  __shared__ int bucket_start[kLengthBuckets];
  __shared__ int max_len;
  bucket_start[tid] = 0;
  if (tid == 0) max_len = 1;
  // Every entry starts as "no work", so none is left unwritten even if cu_q_lens is not
  // non-decreasing and the list overflows.
  for (int64_t i = tid; i < work_cap; i += kScheduleThreads) list[2 * i] = -1;
  __syncthreads();

  // Each thread takes a contiguous run of sequences.
  const int64_t per = (S + kScheduleThreads - 1) / kScheduleThreads;
  const int64_t s0 = tid * per, s1 = s0 + per < S ? s0 + per : S;
  int64_t n_large = 0;
  for (int64_t s = s0; s < s1; ++s) {
    bool large;
    const int64_t n = tiles_of(s, &large);
    if (large) n_large += n;
    atomicMax(&max_len, int(clamp_kv_len(p.kv_lens[s], capacity)));
  }
  __syncthreads();
  const int top = max_len;
  auto bucket_of = [&](int64_t s) { return length_bucket(clamp_kv_len(p.kv_lens[s], capacity), top); };
  for (int64_t s = s0; s < s1; ++s) {
    bool large;
    if (tiles_of(s, &large) > 0 && !large) atomicAdd(&bucket_start[bucket_of(s)], 1);
  }
  __syncthreads();
  int64_t n_large_total, n_small_total;
  const int64_t large_before = block_exclusive_sum<kScheduleThreads>(n_large, &n_large_total);
  const int64_t in_bucket = bucket_start[tid];
  const int64_t bucket_before = block_exclusive_sum<kScheduleThreads>(in_bucket, &n_small_total);
  bucket_start[tid] = int(bucket_before);
  __syncthreads();

  int64_t next_large = large_before;
  for (int64_t s = s0; s < s1; ++s) {
    bool large;
    const int64_t n = tiles_of(s, &large);
    if (n == 0) continue;
    if (large) {
      for (int64_t i = 0; i < n && next_large < work_cap; ++i, ++next_large) {
        list[2 * next_large] = int32_t(s);
        list[2 * next_large + 1] = int32_t(i) | kLargeTileFlag;
      }
    } else {
      const int64_t at = n_large_total + atomicAdd(&bucket_start[bucket_of(s)], 1);
      if (at < work_cap) {
        list[2 * at] = int32_t(s);
        list[2 * at + 1] = 0;
      }
    }
  }
  if (tid == 0) {
    const int64_t total = n_large_total + n_small_total;
    work[0] = int32_t(n_large_total < work_cap ? n_large_total : work_cap);
    work[1] = int32_t(total < work_cap ? total : work_cap);
  }
}

}  // namespace jaxpaged
