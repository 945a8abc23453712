// GPU handler and kernel of the row scatter (one launch for the call's one or two caches:
// blockIdx.y picks the cache). Each cache's work is cut into units, a unit being what one slot
// holds contiguously in the cache: a token's heads x row_bytes (layout 0, NHD, or any cache whose
// heads lie side by side) or one head's row (layout 1, HND). A group of G lanes (a power of two:
// the fewest that cover a unit's 16-byte chunks, at most a warp) copies one unit, each lane up to
// four chunks at a time, all loads before the stores (several 16-byte reads in flight a lane). The
// slot is read and its offset computed once per unit: the first kernel did both per 16-byte chunk
// with 64-bit divisions (NOTES item 57).
#include <algorithm>

#include "common/gpu_launch.h"
#include "write_rows/ffi_binding.h"

namespace jaxpaged {
namespace {

constexpr int kWriteRowsThreads = 256;
constexpr int kWriteRowsDepth = 4;  // chunks a lane holds in flight

struct WriteRowsUnits {
  bool per_head;    // a unit is one head's row (else a token's heads, side by side in the cache)
  int64_t units;    // units of the cache
  int chunks;       // 16-byte chunks of a unit
  int group_shift;  // log2 of the lanes per unit
};

// The unit split of one cache (see the header).
WriteRowsUnits write_rows_units(const WriteRowsParams& p) {
  WriteRowsUnits u;
  u.per_head = p.head_stride != p.row_bytes;
  u.units = u.per_head ? p.num_rows * p.heads : p.num_rows;
  u.chunks = int((u.per_head ? p.row_bytes : p.heads * p.row_bytes) / 16);
  u.group_shift = 0;
  while (u.group_shift < 5 && (1 << u.group_shift) < u.chunks) ++u.group_shift;
  return u;
}

struct WriteRowsLaunch {
  WriteRowsParams p[kWriteRowsMaxCaches];
  WriteRowsUnits u[kWriteRowsMaxCaches];
};

__global__ void __launch_bounds__(kWriteRowsThreads) write_rows_kernel(const JP_GRID_CONSTANT WriteRowsLaunch l) {
  const WriteRowsParams& p = l.p[blockIdx.y];
  const WriteRowsUnits& w = l.u[blockIdx.y];
  const int lane = threadIdx.x % 32, group = 1 << w.group_shift;
  const int64_t warp = (int64_t(blockIdx.x) * kWriteRowsThreads + threadIdx.x) / 32;
  const int64_t unit = (warp << (5 - w.group_shift)) + (lane >> w.group_shift);
  if (unit >= w.units) return;
  const int64_t token = w.per_head ? unit / p.heads : unit;
  const int64_t at = write_rows_offset(p, __ldg(p.slots + token), w.per_head ? unit % p.heads : 0);
  if (at < 0) return;
  // rows are [N, heads, row_bytes]: unit u's bytes start at u * chunks chunks either way.
  const int4* src = reinterpret_cast<const int4*>(p.rows) + unit * w.chunks;
  int4* dst = reinterpret_cast<int4*>(static_cast<char*>(p.cache) + at);
  for (int c = lane & (group - 1); c < w.chunks; c += kWriteRowsDepth * group) {
    int4 v[kWriteRowsDepth];
#pragma unroll
    for (int k = 0; k < kWriteRowsDepth; ++k) {
      if (c + k * group < w.chunks) v[k] = __ldg(src + c + k * group);
    }
#pragma unroll
    for (int k = 0; k < kWriteRowsDepth; ++k) {
      if (c + k * group < w.chunks) dst[c + k * group] = v[k];
    }
  }
}

ffi::Error write_rows_gpu_impl(ffi::RemainingArgs args, int32_t layout, ffi::RemainingRets rets,
                               gpuStream_t stream) {
  WriteRowsLaunch l{};
  int count = 0;
  JP_RETURN_IF_ERROR(decode_write_rows(args, layout, rets, l.p, &count));
  int64_t blocks = 0;
  for (int i = 0; i < count; ++i) {
    // The result is the cache operand's buffer (aliased) unless XLA chose otherwise (seen under
    // vmap's loop on the GPU): then the cache is copied over first, so the result is still the
    // whole cache with the rows written.
    if (l.p[i].source != l.p[i].cache && l.p[i].cache_bytes > 0) {
      JP_RETURN_IF_ERROR(launch_result(gpu::memcpy_d2d_async(l.p[i].cache, l.p[i].source, size_t(l.p[i].cache_bytes),
                                                             stream),
                                       "write_rows' cache copy"));
    }
    l.u[i] = write_rows_units(l.p[i]);
    if (l.u[i].chunks > 0) {
      const int64_t units_per_block = int64_t(kWriteRowsThreads / 32) << (5 - l.u[i].group_shift);
      blocks = std::max(blocks, (l.u[i].units + units_per_block - 1) / units_per_block);
    }
  }
  if (blocks == 0) return ffi::Error::Success();
  if (blocks > 0x7fffffff) return ffi::Error::InvalidArgument("jaxpaged: write_rows has too many rows for one launch");
  write_rows_kernel<<<dim3(unsigned(blocks), unsigned(count)), kWriteRowsThreads, 0, stream>>>(l);
  return last_launch_error("write_rows_kernel");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_write_rows_gpu, write_rows_gpu_impl,
                              write_rows_binding().Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
