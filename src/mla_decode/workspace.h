// The GPU workspace of one MLA-decode call: its one definition, used by the handler to carve it
// and by jaxpaged (through the extension's workspace-size function) to allocate it at lowering,
// so Python mirrors no size. It depends on the device: the Hopper path (sm90/) needs the
// partition schedule and two partial results per partition; the sm_80 path (sm80/) its KV splits.
#pragma once

#include <cstdint>

#include "common/kv_splits.h"
#include "mla_decode/params.h"

namespace jaxpaged {

constexpr int kMlaTileKeys = 64;        // cache tokens per KV tile of the Hopper path
constexpr int kMlaSeqCost = 2;          // a sequence's fixed cost in the schedule, in tiles
constexpr int kMlaMaxPartitions = 160;  // bounds the Hopper path's workspace
constexpr int kMlaWgRows = 64;          // query rows per block of the Hopper path (the wgmma M)
constexpr int64_t kMlaMaxSparseTopk = int64_t(1) << 30;  // the Hopper path's list lengths are int32

// The schedule's int32 arrays, carved from the front of the Hopper path's workspace
// (partition_schedule.cuh fills and reads them).
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

// A reusable schedule (jaxpaged.mla_decode_plan): the Hopper path's schedule words, made once per
// serving step by the plan op and passed to each layer's call, which then launches no schedule
// kernel. Sized for kMlaMaxPartitions so that its shape depends on the batch alone (not on the
// device); laid out as MlaSchedule::at(plan, parts, batch) with the parts of the device and the
// query rows it was made for (mla_plan_for in ffi_binding.h checks them).
inline int64_t mla_plan_ints(int64_t batch) { return MlaSchedule::ints(kMlaMaxPartitions, batch); }

// Partitions of a Hopper call: one thread block per SM, row_blocks blocks per partition.
inline int mla_num_partitions(int sms, int64_t row_blocks) {
  const int64_t capped = sms < kMlaMaxPartitions ? sms : kMlaMaxPartitions;
  const int64_t parts = capped / row_blocks;
  return parts < 1 ? 1 : int(parts);
}

// Query rows per block of the sm_80 kernel, in 16-row units, for a batch row of `rows`
// (= s_q x Hq) query rows.
inline int mla_row_tiles(int64_t rows) { return rows >= 64 ? 4 : 1; }

// What the workspace depends on of the device a call runs on.
struct MlaDevice {
  int sms;
  bool hopper;  // compute capability 9 and the build carries the sm_90a kernels
};

struct MlaWorkspace {
  bool hopper;
  // Hopper path: the partitions, the schedule's words (rounded to 16 bytes), then partial outputs
  // [2 * parts][rows per sequence][512] and their lse [2 * parts][rows per sequence].
  int parts = 0;
  int64_t schedule_floats = 0;
  // sm_80 path: KV splits' partial outputs [split_cap][rows][512] and lse (none when 1).
  int split_cap = 1;
  int64_t floats = 0;  // the whole workspace

  // Only the shapes and formats in p are read (the pointers may be null). A cache format the
  // Hopper kernel does not read (mla_hopper_format) takes the portable kernel, which uses the
  // sm_80 path's layout; sparse calls (p as mla_sparse_as_lists makes it) use the Hopper layout
  // or none (the portable kernel's one split).
  static MlaWorkspace of(const MlaDecodeParams& p, const MlaDevice& d) {
    MlaWorkspace w;
    w.hopper = d.hopper && mla_hopper_format(p) && (!p.sparse || p.topk <= kMlaMaxSparseTopk);
    const int64_t rows_per_b = p.s_q * p.num_heads;
    if (w.hopper) {
      const int64_t row_blocks = (rows_per_b + kMlaWgRows - 1) / kMlaWgRows;
      w.parts = mla_num_partitions(d.sms, row_blocks);
      w.schedule_floats = (MlaSchedule::ints(w.parts, p.batch) + 3) / 4 * 4;
      w.floats = w.schedule_floats + 2 * w.parts * rows_per_b * (kMlaLatentDim + 1);
    } else if (!p.sparse) {
      const int64_t block_rows = 16 * mla_row_tiles(rows_per_b);
      const int64_t blocks = p.batch * ((rows_per_b + block_rows - 1) / block_rows);
      w.split_cap = kv_split_cap(blocks, p.max_pages * p.page_size);
      w.floats = w.split_cap > 1 ? w.split_cap * p.batch * rows_per_b * (kMlaLatentDim + 1) : 0;
    }
    return w;
  }
};

// Bytes of workspace a GPU call with these shapes needs on `device` (a CUDA ordinal; negative:
// the most any visible device needs); a sparse call's shapes as mla_sparse_as_lists gives them.
// handler_gpu.cu; the extension exports it to Python.
int64_t mla_decode_workspace_bytes(const MlaDecodeParams& shapes, int device);

// A sparse call (B query tokens x s_q, each with its index list) as the Hopper kernel's dense
// sequences: B * s_q lists of one query token each (params.h).
inline MlaDecodeParams mla_sparse_as_lists(MlaDecodeParams p, const int32_t* indices, const int32_t* topk_lens,
                                           int64_t topk) {
  p.sparse = true;
  p.indices = indices;
  p.topk_lens = topk_lens;
  p.topk = topk;
  p.lens_every = p.s_q;
  p.batch *= p.s_q;
  p.s_q = 1;
  p.causal = false;
  p.kv_lens = nullptr;
  p.block_tables = nullptr;
  p.max_pages = 0;
  return p;
}

}  // namespace jaxpaged
