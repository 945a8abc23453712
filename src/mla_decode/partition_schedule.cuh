// Device-side work split of an MLA-decode call for the Hopper kernel (wgmma_kernel.cuh), computed
// from kv_lens on the GPU every call (the host never reads lengths; the call stays graph-capturable).
//
// All sequences' 64-token KV tiles are laid end to end, each sequence preceded by kMlaSeqCost units
// of fixed cost (query load, epilogue), and the line is cut into `num_parts` equal spans. One
// partition = one span = row_blocks thread blocks (one per 64 query rows) that walk it in order:
// the tail of one sequence, whole sequences, the head of another. A sequence cut by span borders is
// finished by mla_merge_pieces_kernel from its pieces' partial outputs and lse; an uncut one is
// written straight to the output. Long and short sequences thus cost the same per key, and a batch
// of one long sequence is spread over the whole GPU.
//
// Partial results: a partition has at most two cut sequences, its first and its last, so piece
// slots are 2 * partition (first) and 2 * partition + 1 (last).
#pragma once

#include "common/block_scan.cuh"
#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "mla_decode/params.h"

namespace jaxpaged {

constexpr int kMlaTileKeys = 64;        // cache tokens per KV tile
constexpr int kMlaSeqCost = 2;          // a sequence's fixed cost, in tiles
constexpr int kMlaMaxPartitions = 160;  // bounds the workspace; jaxpaged/mla_decode.py mirrors it
constexpr int kMlaScheduleThreads = 256;

// The schedule's int32 arrays, carved from the front of the workspace.
struct MlaSchedule {
  int* header;          // [0] cost units per partition, [1] total cost
  int* part_first;      // [num_parts] first sequence of each partition
  int* part_last;       // [num_parts] last sequence (-1: empty partition)
  int* seq_start;       // [batch] cost position where each sequence starts
  int* seq_first_part;  // [batch] first partition holding a piece of it
  int* seq_pieces;      // [batch] partitions holding a piece of it (1: uncut)

  static int64_t ints(int64_t num_parts, int64_t batch) { return 2 + 2 * num_parts + 3 * batch; }
  static MlaSchedule at(int* base, int64_t num_parts, int64_t batch) {
    MlaSchedule s;
    s.header = base;
    s.part_first = base + 2;
    s.part_last = s.part_first + num_parts;
    s.seq_start = s.part_last + num_parts;
    s.seq_first_part = s.seq_start + batch;
    s.seq_pieces = s.seq_first_part + batch;
    return s;
  }
};

// Partitions for a call: one thread block per SM, row_blocks blocks per partition.
inline int mla_num_partitions(int sms, int64_t row_blocks) {
  const int64_t capped = sms < kMlaMaxPartitions ? sms : kMlaMaxPartitions;
  const int64_t parts = capped / row_blocks;
  return parts < 1 ? 1 : int(parts);
}

// Tiles of a sequence of kv_len cached tokens (kv_len already clamped to its pages).
__device__ __forceinline__ int mla_tiles_of(int64_t kv_len) {
  return int((kv_len + kMlaTileKeys - 1) / kMlaTileKeys);
}
__device__ __forceinline__ int mla_seq_tiles(const MlaDecodeParams& p, int64_t b) {
  return mla_tiles_of(clamp_kv_len(p.kv_lens[b], p.max_pages * p.page_size));
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

// One block. Cost positions fit in int32: a sequence has at most 2^31 / 64 tiles by its int32 length.
__global__ void __launch_bounds__(kMlaScheduleThreads)
    mla_schedule_kernel(const MlaDecodeParams p, int num_parts, MlaSchedule s) {
  const int tid = threadIdx.x;
  int64_t mine = 0;
  for (int64_t b = tid; b < p.batch; b += kMlaScheduleThreads) mine += mla_seq_tiles(p, b) + kMlaSeqCost;
  int64_t total = 0;
  block_exclusive_sum<kMlaScheduleThreads>(mine, &total);
  const int target = int((total + num_parts - 1) / num_parts);  // >= 1: every sequence costs >= 1
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
    const int first = int(start / target), last = int((start + cost - 1) / target);
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

// Finishes cut sequences: one warp per (output row, 128-column quarter) merges the pieces' partial
// outputs by their lse (weights exp(lse_k - max)); uncut sequences return at once. A NaN lse (a
// corrupt page id seen by that piece) makes the row NaN. Grid: (batch x row groups, 4 quarters),
// so even one sequence's merge (B = 1, up to 160 pieces) is spread over many warps.
constexpr int kMlaMergeThreads = 256;
constexpr int kMlaMergeRows = kMlaMergeThreads / 32;
constexpr int kMlaMergeQuarters = 4;

template <typename T>
__global__ void __launch_bounds__(kMlaMergeThreads)
    mla_merge_pieces_kernel(const MlaDecodeParams p, const MlaSchedule s, const float* __restrict__ ws_out,
                            const float* __restrict__ ws_lse) {
  const int64_t rows_per_b = p.s_q * p.num_heads;
  const int64_t blocks_per_b = (rows_per_b + kMlaMergeRows - 1) / kMlaMergeRows;
  const int64_t b = blockIdx.x / blocks_per_b;
  const int pieces = s.seq_pieces[b];
  if (pieces <= 1) return;
  const int lane = threadIdx.x % 32;
  const int64_t r = (blockIdx.x % blocks_per_b) * kMlaMergeRows + threadIdx.x / 32;
  if (r >= rows_per_b) return;
  const int col = blockIdx.y * (kMlaLatentDim / kMlaMergeQuarters) + 4 * lane;
  const int first = s.seq_first_part[b];
  auto slot_of = [&](int k) { return mla_piece_slot(s, first + k, int(b)); };
  float m = -INFINITY;
  int nan = 0;
  for (int k = lane; k < pieces; k += 32) {
    const float v = ws_lse[slot_of(k) * rows_per_b + r];
    nan |= isnan(v);
    m = fmaxf(m, v);
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    nan |= JP_SHFL_XOR(nan, off);
    m = fmaxf(m, JP_SHFL_XOR(m, off));
  }
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  float sum = 0.f;
  if (m != -INFINITY && !nan) {
#pragma unroll 4
    for (int k = 0; k < pieces; ++k) {
      const int slot = slot_of(k);
      const float w = __expf(ws_lse[slot * rows_per_b + r] - m);
      if (w == 0.f) continue;  // an empty piece: nothing to add
      sum += w;
      const float4 v = *reinterpret_cast<const float4*>(ws_out + (slot * rows_per_b + r) * kMlaLatentDim + col);
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
    }
  }
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  const int64_t row = b * rows_per_b + r;
  T* out = static_cast<T*>(p.out) + row * kMlaLatentDim + col;
  const float x[4] = {acc.x, acc.y, acc.z, acc.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) out[e] = from_float<T>(nan ? NAN : x[e] * inv);
  if (lane == 0 && blockIdx.y == 0) p.lse[row] = nan ? NAN : (sum > 0.f ? m + __logf(sum) : -INFINITY);
}

}  // namespace jaxpaged
