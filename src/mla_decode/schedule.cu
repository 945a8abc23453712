// The Hopper path's partition schedule and piece merge kernels (the split they compute and read
// is described in partition_schedule.cuh), and their launchers. Architecture-neutral device code.
#include <climits>

#include "common/block_scan.cuh"
#include "common/gpu_launch.h"
#include "mla_decode/launch.h"
#include "mla_decode/partition_schedule.cuh"

namespace jaxpaged {

constexpr int kMlaScheduleThreads = 256;

// One block. Cost positions fit in int32: a sequence has at most 2^31 / 64 tiles by its int32 length.
// clear_ints: words from s.header to zero first (the plan op's array past the schedule).
__global__ void __launch_bounds__(kMlaScheduleThreads)
    mla_schedule_kernel(const MlaDecodeParams p, int num_parts, MlaSchedule s, int64_t clear_ints) {
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
// exp(lse_k - max)); uncut sequences return at once. A NaN lse (a corrupt page id seen by that
// piece) makes the row NaN. A block takes mla_merge_rows(Split) rows x one 128-column quarter;
// each row's pieces are dealt over Split warps (piece k to warp k % Split), whose sums meet in
// shared memory. Split = 4 where sequences are cut into many pieces (a small batch: B = 1 at 32k
// tokens has ~66 per row, and one warp per row walking them all kept only 64 blocks' worth of
// loads in flight: 1 TB/s, 18 us), else 1 (a few pieces per row: more warps would each redo the
// weights for little; NOTES item 25).
constexpr int kMlaMergeThreads = 256;
constexpr int kMlaMergeQuarters = 4;
__host__ __device__ constexpr int mla_merge_rows(int split) { return kMlaMergeThreads / 32 / split; }
// The split for a call: 4 when each sequence spans about 4 or more partitions.
inline int mla_merge_split(int64_t batch, int parts) { return 4 * batch <= parts ? 4 : 1; }

template <typename T, int Split>
__global__ void __launch_bounds__(kMlaMergeThreads)
    mla_merge_pieces_kernel(const MlaDecodeParams p, int p_parts, const MlaSchedule s,
                            const float* __restrict__ ws_out, const float* __restrict__ ws_lse) {
  const int64_t rows_per_b = p.s_q * p.num_heads;
  constexpr int kRows = mla_merge_rows(Split);
  const int64_t blocks_per_b = (rows_per_b + kRows - 1) / kRows;
  const int64_t b = blockIdx.x / blocks_per_b;
  // (clamped to the partitions: a plan passed in is data the caller could have altered; a bad one
  // gives wrong numbers, never an access out of bounds)
  const int first = min(max(s.seq_first_part[b], 0), p_parts - 1);
  const int pieces = min(s.seq_pieces[b], p_parts - first);
  if (pieces <= 1) return;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int row_in_block = warp / Split, share = warp % Split;
  const int64_t r = (blockIdx.x % blocks_per_b) * kRows + row_in_block;
  const bool live = r < rows_per_b;  // (no early return: the block meets at a barrier below)
  const int col = blockIdx.y * (kMlaLatentDim / kMlaMergeQuarters) + 4 * lane;
  // Each lane first holds the slots and weights of pieces lane, lane + 32, ...; the column loop
  // then takes them by shuffle, so its loads of partial outputs do not wait on schedule reads.
  constexpr int kPerLane = (kMlaMaxPartitions + 31) / 32;
  int slot[kPerLane];
  float w[kPerLane];
  float m = -INFINITY;
  int nan = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int k = lane + 32 * i;
    slot[i] = k < pieces ? mla_piece_slot(s, first + k, int(b)) : 0;
    w[i] = k < pieces && live ? ws_lse[slot[i] * rows_per_b + r] : -INFINITY;
    nan |= isnan(w[i]);
    m = fmaxf(m, w[i]);
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
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int n = live ? min(32, pieces - 32 * i) : 0;
    const float wi = w[i];
    const int si = slot[i];
    // This warp's pieces of the chunk (32 is a multiple of the split, so piece 32 i + j is this
    // warp's when j is). A counted loop: unrolled, its loads are all issued before the first is
    // used.
#pragma unroll 8
    for (int j = share; j < n; j += Split) {  // an empty piece: weight 0, output 0
      const float wj = gpu::shfl(wi, j);
      const int sj = gpu::shfl(si, j);
      const float4 v = *reinterpret_cast<const float4*>(ws_out + (sj * rows_per_b + r) * kMlaLatentDim + col);
      acc.x += wj * v.x;
      acc.y += wj * v.y;
      acc.z += wj * v.z;
      acc.w += wj * v.w;
    }
  }
  if constexpr (Split > 1) {  // the row's other warps hand their sums to its first warp
    __shared__ float4 partial[kRows][Split - 1][32];
    if (share > 0) partial[row_in_block][share - 1][lane] = acc;
    __syncthreads();
    if (share > 0) return;
#pragma unroll
    for (int k = 0; k < Split - 1; ++k) {
      const float4 v = partial[row_in_block][k][lane];
      acc.x += v.x;
      acc.y += v.y;
      acc.z += v.z;
      acc.w += v.w;
    }
  }
  if (!live) return;
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  const int64_t row = b * rows_per_b + r;
  T* out = static_cast<T*>(p.out) + row * kMlaLatentDim + col;
  out[0] = from_float<T>(nan ? NAN : acc.x * inv);
  out[1] = from_float<T>(nan ? NAN : acc.y * inv);
  out[2] = from_float<T>(nan ? NAN : acc.z * inv);
  out[3] = from_float<T>(nan ? NAN : acc.w * inv);
  if (lane == 0 && blockIdx.y == 0) p.lse[row] = nan ? NAN : (sum > 0.f ? m + __logf(sum) : -INFINITY);
}


ffi::Error launch_mla_schedule(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, int64_t clear_ints,
                               gpuStream_t stream) {
  mla_schedule_kernel<<<1, kMlaScheduleThreads, 0, stream>>>(p, parts, sched, clear_ints);
  return last_launch_error("mla_schedule_kernel");
}

namespace {
template <typename T, int Split>
ffi::Error launch_merge_split(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, const float* ws_out,
                              const float* ws_lse, gpuStream_t stream) {
  constexpr int rows = mla_merge_rows(Split);
  const int64_t rows_per_b = p.s_q * p.num_heads;
  const dim3 grid(unsigned(p.batch * ((rows_per_b + rows - 1) / rows)), kMlaMergeQuarters);
  mla_merge_pieces_kernel<T, Split><<<grid, kMlaMergeThreads, 0, stream>>>(p, parts, sched, ws_out, ws_lse);
  return last_launch_error("mla_merge_pieces_kernel");
}
}  // namespace

template <typename T>
ffi::Error launch_mla_merge(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, const float* ws_out,
                            const float* ws_lse, gpuStream_t stream) {
  if (mla_merge_split(p.batch, parts) == 4) return launch_merge_split<T, 4>(p, parts, sched, ws_out, ws_lse, stream);
  return launch_merge_split<T, 1>(p, parts, sched, ws_out, ws_lse, stream);
}

template ffi::Error launch_mla_merge<gpu_half>(const MlaDecodeParams&, int, const MlaSchedule&, const float*,
                                               const float*, gpuStream_t);
template ffi::Error launch_mla_merge<gpu_bf16>(const MlaDecodeParams&, int, const MlaSchedule&, const float*,
                                               const float*, gpuStream_t);

}  // namespace jaxpaged
