// The device-side schedule of a ragged paged-attention call (cu_q_lens given), computed from
// cu_q_lens on the GPU so the host never reads it (the call stays graph-capturable).
//
// Block 0 lists the work items of tile_kernel.cuh: every sequence whose query chunk has more than
// kSmallRows rows (q_len x group) is cut into large tiles, the others get one small tile. Large
// tiles are listed first: they run longest, and starting them first keeps them off the tail of the
// grid while the many short decode tiles fill in around them. Unused entries read -1.
// The other blocks clear padding rows (rows of q that no sequence owns: output 0, lse -inf), which
// the attention kernel never visits.
#pragma once

#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "paged_attention/params.h"
#include "paged_attention/tile_kernel.cuh"

namespace jaxpaged {

constexpr int kScheduleThreads = 256;
constexpr int kPaddingRowsPerBlock = kScheduleThreads / 32;  // one warp per row

// Upper bound on the work items of a ragged call: sum over sequences of ceil(rows / 64), or 1 for a
// small tile, is at most num_tokens * group / 64 + num_seqs. jaxpaged/paged_attention.py mirrors it.
inline int64_t ragged_work_capacity(int64_t num_tokens, int64_t group, int64_t num_seqs) {
  return (num_tokens * group + kLargeRows - 1) / kLargeRows + num_seqs;
}

template <typename T>
__global__ void __launch_bounds__(kScheduleThreads)
    paged_tile_schedule_kernel(const PagedAttentionParams p, int32_t* __restrict__ work,
                               int64_t work_cap, int num_splits, float* __restrict__ ws_lse) {
  const int64_t S = p.num_seqs, num_tokens = p.num_tokens;
  const int tid = threadIdx.x;
  if (blockIdx.x > 0) {
    const int lane = tid % 32;
    const int64_t t = (int64_t(blockIdx.x) - 1) * kPaddingRowsPerBlock + tid / 32;
    int64_t seq, q_begin, q_len;
    if (t >= num_tokens || find_sequence(p.cu_q_lens, S, num_tokens, t, &seq, &q_begin, &q_len)) return;
    const int64_t num_rows = num_tokens * p.num_q_heads;
    for (int64_t h = 0; h < p.num_q_heads; ++h) {
      const int64_t row = t * p.num_q_heads + h;
      if (num_splits == 1) {
        for (int64_t d = lane; d < p.head_dim; d += 32) static_cast<T*>(p.out)[row * p.head_dim + d] = from_float<T>(0.f);
        if (lane == 0) p.lse[row] = -INFINITY;
      } else {  // every split says "empty": the merge then writes 0 and -inf
        for (int k = lane; k < num_splits; k += 32) ws_lse[k * num_rows + row] = -INFINITY;
      }
    }
    return;
  }

  const int64_t group = p.num_q_heads / p.num_kv_heads;
  auto cu_at = [&](int64_t i) -> int64_t {
    const int64_t c = p.cu_q_lens[i];
    return c < 0 ? 0 : (c > num_tokens ? num_tokens : c);
  };
  auto tiles_of = [&](int64_t s, bool* large) -> int64_t {
    const int64_t q_len = cu_at(s + 1) - cu_at(s);
    const int64_t rows = q_len > 0 ? q_len * group : 0;
    *large = rows > kSmallRows;
    return rows == 0 ? 0 : (*large ? (rows + kLargeRows - 1) / kLargeRows : 1);
  };

  // Every entry starts as "no work", so none is left unwritten even if cu_q_lens is not
  // non-decreasing and the list overflows. Each thread then takes a contiguous run of sequences;
  // thread 0 scans the per-thread counts.
  for (int64_t i = tid; i < work_cap; i += kScheduleThreads) work[2 * i] = -1;
  const int64_t per = (S + kScheduleThreads - 1) / kScheduleThreads;
  const int64_t s0 = tid * per, s1 = s0 + per < S ? s0 + per : S;
  int64_t n_large = 0, n_small = 0;
  for (int64_t s = s0; s < s1; ++s) {
    bool large;
    const int64_t n = tiles_of(s, &large);
    (large ? n_large : n_small) += n;
  }
  __shared__ int64_t off_large[kScheduleThreads], off_small[kScheduleThreads];
  __shared__ int64_t total_large;
  off_large[tid] = n_large;
  off_small[tid] = n_small;
  __syncthreads();
  if (tid == 0) {
    int64_t a = 0, b = 0;
    for (int i = 0; i < kScheduleThreads; ++i) {
      const int64_t x = off_large[i], y = off_small[i];
      off_large[i] = a;
      off_small[i] = b;
      a += x;
      b += y;
    }
    total_large = a;
  }
  __syncthreads();
  int64_t next_large = off_large[tid], next_small = total_large + off_small[tid];
  for (int64_t s = s0; s < s1; ++s) {
    bool large;
    const int64_t n = tiles_of(s, &large);
    int64_t& next = large ? next_large : next_small;
    for (int64_t i = 0; i < n; ++i, ++next) {
      if (next >= work_cap) break;  // only if cu_q_lens is not non-decreasing
      work[2 * next] = int32_t(s);
      work[2 * next + 1] = int32_t(i) | (large ? kLargeTileFlag : 0);
    }
  }
}

}  // namespace jaxpaged
