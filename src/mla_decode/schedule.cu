// The Hopper path's partition schedule and piece merge kernels (the split they compute and read
// is described in partition_schedule.cuh), and their launchers. Architecture-neutral device code.
#include <climits>

#include "common/block_scan.cuh"
#include "common/gpu_launch.h"
#include "common/pdl.cuh"
#include "mla_decode/launch.h"
#include "mla_decode/partition_schedule.cuh"

namespace jaxpaged {

constexpr int kMlaScheduleThreads = 256;

// One block. Cost positions fit in int32: a sequence has at most 2^31 / 64 tiles by its int32 length.
// clear_ints: words from s.header to zero first (the plan op's array past the schedule).
__global__ void __launch_bounds__(kMlaScheduleThreads)
    mla_schedule_kernel(const MlaDecodeParams p, int num_parts, MlaSchedule s, int64_t clear_ints) {
  // The attention kernel after it (a dependent launch) may start its blocks now; they wait for
  // this kernel's schedule before reading it (pdl_wait).
  pdl_launch_dependents();
  const int tid = threadIdx.x;
  for (int64_t i = tid; i < clear_ints; i += kMlaScheduleThreads) s.header[i] = 0;
  __shared__ int cost_min, cost_max;
  if (tid == 0) {
    cost_min = INT_MAX;
    cost_max = 0;
  }
  __syncthreads();  // (also orders the clearing before the schedule's writes)
  int64_t mine = 0;
  int my_min = INT_MAX, my_max = 0;
  for (int64_t b = tid; b < p.batch; b += kMlaScheduleThreads) {
    const int cost = mla_seq_tiles(p, b) + kMlaSeqCost;
    mine += cost;
    my_min = min(my_min, cost);
    my_max = max(my_max, cost);
  }
  atomicMin(&cost_min, my_min);
  atomicMax(&cost_max, my_max);
  int64_t total = 0;
  block_exclusive_sum<kMlaScheduleThreads>(mine, &total);  // its barriers also publish min and max
  int target = int((total + num_parts - 1) / num_parts);  // >= 1: every sequence costs >= 1
  // Sequences of one length (the common decode batch) are cut at their ends instead when whole
  // sequences per span cost at most 1/8 more: a cut costs its pieces' float partial outputs
  // (written, then read by the merge), which measured more than the spans' imbalance.
  if (cost_min == cost_max) {
    const int64_t whole = (target + cost_max - 1) / cost_max * int64_t(cost_max);
    if (8 * whole <= 9 * int64_t(target)) target = int(whole);
  }
  for (int part = tid; part < num_parts; part += kMlaScheduleThreads) {
    s.part_first[part] = 0;
    s.part_last[part] = -1;
  }
  if (tid == 0) {
    s.header[0] = target;
    s.header[1] = int(total);
  }
  __syncthreads();  // the defaults above land before sequences overwrite them
  int64_t carry = 0;
  for (int64_t base = 0; base < p.batch; base += kMlaScheduleThreads) {
    const int64_t b = base + tid;
    const int64_t cost = b < p.batch ? mla_seq_tiles(p, b) + kMlaSeqCost : 0;
    int64_t chunk_total = 0;
    const int64_t start = carry + block_exclusive_sum<kMlaScheduleThreads>(cost, &chunk_total);
    carry += chunk_total;
    if (b >= p.batch) continue;
    // A sequence with tiles belongs to the partitions that hold at least one of its tiles: one
    // whose span holds only the sequence's fixed cost would load its queries and write an empty
    // piece for the merge to read (2 of 68 pieces at B = 4, 4K tokens, 66 partitions). Such a
    // partition ends with the sequence before (or is empty). A sequence without tiles keeps the
    // partition(s) of its fixed cost (its rows still need their 0 / -inf).
    const int64_t fixed_end = cost > kMlaSeqCost ? start + kMlaSeqCost : start;
    const int first = int(fixed_end / target), last = int((start + cost - 1) / target);
    for (int part = int(start / target); part < first; ++part) {
      s.part_last[part] = int64_t(part) * target < start ? int(b) - 1 : -1;
    }
    s.seq_start[b] = int(start);
    s.seq_first_part[b] = first;
    s.seq_pieces[b] = last - first + 1;
    for (int part = first; part <= last; ++part) {
      if (int64_t(part) * target >= start) s.part_first[part] = int(b);
      const int64_t last_pos = min(int64_t(part + 1) * target, total) - 1;
      if (last_pos < start + cost) s.part_last[part] = int(b);
    }
  }
}

// Finishes cut sequences: merges the pieces' partial outputs of a row by their lse (weights
// exp(lse_k - max) / sum); uncut sequences return at once. A NaN lse (a corrupt page id seen by
// that piece) makes the row NaN. A block takes whole 512-column rows, 128 threads per row (a float4
// of columns each): mla_merge_rows(Shares) rows, each row's pieces dealt over Shares thread groups
// (piece k to group k % Shares) whose sums meet in shared memory. One warp per row first derives
// the row's weights and piece slots into shared memory (once per row: the earlier merge had every
// warp of a row, 16 of them, redo them, and took 10x FlashMLA's instructions, session 18's ncu).
// Shares = 4 or 2 where sequences are cut into many pieces (B = 1 at 32k tokens has ~66 per row:
// more loads in flight, NOTES item 25), else 1. Blocks of 256 threads (2 rows, or 1 row of 2
// shares), 512 for 4 shares.
constexpr int kMlaMergeRowThreads = kMlaLatentDim / 4;  // 128: a float4 of columns each
__host__ __device__ constexpr int mla_merge_threads(int shares) { return shares > 2 ? 128 * shares : 256; }
__host__ __device__ constexpr int mla_merge_rows(int shares) {
  return mla_merge_threads(shares) / kMlaMergeRowThreads / shares;
}
// The piece groups for a call: 4 when each sequence spans about 8 or more partitions, 2 from 4.
inline int mla_merge_shares(int64_t batch, int parts) { return 8 * batch <= parts ? 4 : 4 * batch <= parts ? 2 : 1; }

template <typename T, int Shares>
__global__ void __launch_bounds__(mla_merge_threads(Shares))
    mla_merge_pieces_kernel(const MlaDecodeParams p, int p_parts, const MlaSchedule s,
                            const float* __restrict__ ws_out, const float* __restrict__ ws_lse) {
  static_assert(mla_merge_rows(Shares) * Shares * kMlaMergeRowThreads == mla_merge_threads(Shares), "block shape");
  const int64_t rows_per_b = p.s_q * p.num_heads;
  constexpr int kRows = mla_merge_rows(Shares);
  const int64_t blocks_per_b = (rows_per_b + kRows - 1) / kRows;
  const int64_t b = blockIdx.x / blocks_per_b;
  // A dependent launch (launch_chained): this grid may start while the attention kernel still
  // runs, once all its blocks have passed their own pdl_wait (it triggers only after that wait, or
  // by exiting). The schedule words are read before this grid waits: with a plan they were
  // written before the attention kernel's plain launch; without one, by the schedule kernel that
  // every attention block waited for before it triggered or exited - so they are complete, and
  // read from L2 (__ldcg: no stale L1 line). The attention kernels must keep that order (no
  // trigger or exit before their wait). The pieces' partial results are read only after
  // pdl_wait. Block 0 always waits, even when it has nothing to merge, so that this grid never
  // completes before the attention kernel does: what follows in the stream (the next layer's
  // reads of the output) is ordered after both.
  if (blockIdx.x == 0) pdl_wait();
  // (clamped to the partitions: a plan passed in is data the caller could have altered; a bad one
  // gives wrong numbers, never an access out of bounds)
  const int first = min(max(__ldcg(s.seq_first_part + b), 0), p_parts - 1);
  const int pieces = min(__ldcg(s.seq_pieces + b), p_parts - first);
  if (pieces <= 1) return;
  pdl_wait();
  const int64_t r0 = (blockIdx.x % blocks_per_b) * kRows;
  __shared__ float weight[kRows][kMlaMaxPartitions];
  __shared__ int slot[kRows][kMlaMaxPartitions];
  __shared__ int row_nan[kRows];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (warp < kRows && r0 + warp < rows_per_b) {  // one warp per row: the weights, once
    const int64_t r = r0 + warp;
    constexpr int kPerLane = (kMlaMaxPartitions + 31) / 32;
    float w[kPerLane];
    float m = -INFINITY;
    int nan = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int k = lane + 32 * i;
      const int sl = k < pieces ? mla_piece_slot(s, first + k, int(b)) : 0;
      if (k < pieces) slot[warp][k] = sl;
      w[i] = k < pieces ? ws_lse[sl * rows_per_b + r] : -INFINITY;
      nan |= isnan(w[i]);
      m = fmaxf(m, w[i]);  // fmaxf skips a NaN; the flag carries it
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      nan |= gpu::shfl_xor(nan, off);
      m = fmaxf(m, gpu::shfl_xor(m, off));
    }
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      w[i] = m == -INFINITY || nan ? 0.f : __expf(w[i] - m);  // 0 for pieces past the count
      sum += w[i];
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += gpu::shfl_xor(sum, off);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int k = lane + 32 * i;
      if (k < pieces) weight[warp][k] = w[i] * inv;
    }
    if (lane == 0) {
      row_nan[warp] = nan;
      p.lse[b * rows_per_b + r] = nan ? NAN : (sum > 0.f ? m + __logf(sum) : -INFINITY);
    }
  }
  __syncthreads();
  const int row_in_block = threadIdx.x / (kMlaMergeRowThreads * Shares);
  const int share = threadIdx.x / kMlaMergeRowThreads % Shares;
  const int col = 4 * (threadIdx.x % kMlaMergeRowThreads);
  const int64_t r = r0 + row_in_block;
  const bool live = r < rows_per_b;  // (no early return: the block meets at a barrier below)
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (live) {
    // A counted loop: unrolled, its loads are all issued before the first is used. A piece of
    // weight 0 (empty, or the row is -inf or NaN) is not read.
#pragma unroll 8
    for (int k = share; k < pieces; k += Shares) {
      const float wk = weight[row_in_block][k];
      if (wk == 0.f) continue;
      const float4 v =
          *reinterpret_cast<const float4*>(ws_out + (slot[row_in_block][k] * rows_per_b + r) * kMlaLatentDim + col);
      acc.x += wk * v.x;
      acc.y += wk * v.y;
      acc.z += wk * v.z;
      acc.w += wk * v.w;
    }
  }
  if constexpr (Shares > 1) {  // the row's other groups hand their sums to its first
    __shared__ float4 partial[kRows][Shares - 1][kMlaMergeRowThreads];
    if (share > 0) partial[row_in_block][share - 1][threadIdx.x % kMlaMergeRowThreads] = acc;
    __syncthreads();
    if (share > 0) return;
#pragma unroll
    for (int k = 0; k < Shares - 1; ++k) {
      const float4 v = partial[row_in_block][k][threadIdx.x % kMlaMergeRowThreads];
      acc.x += v.x;
      acc.y += v.y;
      acc.z += v.z;
      acc.w += v.w;
    }
  }
  if (!live) return;
  if (row_nan[row_in_block]) acc = make_float4(NAN, NAN, NAN, NAN);
  // Four columns in one 8-byte store: a warp writes 256 contiguous bytes.
  uint2 packed;
  packed.x = pack2<T>(acc.x, acc.y);
  packed.y = pack2<T>(acc.z, acc.w);
  *reinterpret_cast<uint2*>(static_cast<T*>(p.out) + (b * rows_per_b + r) * kMlaLatentDim + col) = packed;
}


ffi::Error launch_mla_schedule(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, int64_t clear_ints,
                               gpuStream_t stream) {
  mla_schedule_kernel<<<1, kMlaScheduleThreads, 0, stream>>>(p, parts, sched, clear_ints);
  return last_launch_error("mla_schedule_kernel");
}

int64_t mla_merge_blocks(const MlaDecodeParams& p, int parts) {
  const int rows = mla_merge_rows(mla_merge_shares(p.batch, parts));
  return p.batch * ((p.s_q * p.num_heads + rows - 1) / rows);
}

namespace {
// (Shares is mla_merge_shares(p.batch, parts): launch_mla_merge picks the instance by it)
template <typename T, int Shares>
ffi::Error launch_merge(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, const float* ws_out,
                        const float* ws_lse, gpuStream_t stream) {
  const dim3 grid(unsigned(mla_merge_blocks(p, parts)));
  return launch_chained(dependent_launches(), "mla_merge_pieces_kernel", mla_merge_pieces_kernel<T, Shares>, grid,
                        dim3(mla_merge_threads(Shares)), 0, stream, p, parts, sched, ws_out, ws_lse);
}
}  // namespace

template <typename T>
ffi::Error launch_mla_merge(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, const float* ws_out,
                            const float* ws_lse, gpuStream_t stream) {
  const int shares = mla_merge_shares(p.batch, parts);
  if (shares == 4) return launch_merge<T, 4>(p, parts, sched, ws_out, ws_lse, stream);
  if (shares == 2) return launch_merge<T, 2>(p, parts, sched, ws_out, ws_lse, stream);
  return launch_merge<T, 1>(p, parts, sched, ws_out, ws_lse, stream);
}

template ffi::Error launch_mla_merge<gpu_half>(const MlaDecodeParams&, int, const MlaSchedule&, const float*,
                                               const float*, gpuStream_t);
template ffi::Error launch_mla_merge<gpu_bf16>(const MlaDecodeParams&, int, const MlaSchedule&, const float*,
                                               const float*, gpuStream_t);

}  // namespace jaxpaged
