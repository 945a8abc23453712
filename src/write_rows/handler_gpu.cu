// GPU handler and kernel of the row scatter. The work is cut into units, a unit being what one
// slot holds contiguously in the cache: a token's heads x row_bytes (layout 0, NHD) or one head's
// row (layout 1, HND). A group of G lanes (a power of two: the fewest that cover a unit's 16-byte
// chunks, at most a warp) copies one unit, each lane up to four chunks at a time, all loads before
// the stores (several 16-byte reads in flight per lane). The slot is read and its offset computed
// once per unit, not per chunk: the first kernel did both per 16-byte chunk with 64-bit divisions,
// which made it instruction-bound (NOTES item 57).
#include "common/gpu_launch.h"
#include "write_rows/ffi_binding.h"

namespace jaxpaged {
namespace {

constexpr int kWriteRowsThreads = 256;
constexpr int kWriteRowsDepth = 4;  // chunks a lane holds in flight

__global__ void __launch_bounds__(kWriteRowsThreads)
    write_rows_kernel(const WriteRowsParams p, int64_t units, int unit_chunks, int group_shift) {
  const int lane = threadIdx.x % 32, group = 1 << group_shift;
  const int64_t warp = (int64_t(blockIdx.x) * kWriteRowsThreads + threadIdx.x) / 32;
  const int64_t unit = (warp << (5 - group_shift)) + (lane >> group_shift);
  if (unit >= units) return;
  // Layout 0: a unit is a token (all its heads, contiguous in the cache); layout 1: a (token, head).
  const bool per_head = p.head_stride != p.row_bytes;
  const int64_t token = per_head ? unit / p.heads : unit;
  const int64_t at = write_rows_offset(p, __ldg(p.slots + token), per_head ? unit % p.heads : 0);
  if (at < 0) return;
  // rows are [N, heads, row_bytes]: unit u's bytes start at u * unit_chunks chunks either way.
  const int4* src = reinterpret_cast<const int4*>(p.rows) + unit * unit_chunks;
  int4* dst = reinterpret_cast<int4*>(static_cast<char*>(p.cache) + at);
  for (int c = lane & (group - 1); c < unit_chunks; c += kWriteRowsDepth * group) {
    int4 v[kWriteRowsDepth];
#pragma unroll
    for (int k = 0; k < kWriteRowsDepth; ++k) {
      if (c + k * group < unit_chunks) v[k] = __ldg(src + c + k * group);
    }
#pragma unroll
    for (int k = 0; k < kWriteRowsDepth; ++k) {
      if (c + k * group < unit_chunks) dst[c + k * group] = v[k];
    }
  }
}

ffi::Error write_rows_gpu_impl(ffi::AnyBuffer cache, ffi::AnyBuffer rows, ffi::Buffer<ffi::S32> slots,
                               int32_t layout, ffi::Result<ffi::AnyBuffer> out, gpuStream_t stream) {
  WriteRowsParams p;
  JP_RETURN_IF_ERROR(decode_write_rows(cache, rows, slots, layout, out, &p));
  const bool per_head = p.head_stride != p.row_bytes;
  const int64_t units = per_head ? p.num_rows * p.heads : p.num_rows;
  const int64_t unit_chunks = (per_head ? p.row_bytes : p.heads * p.row_bytes) / 16;
  if (units == 0 || unit_chunks == 0) return ffi::Error::Success();
  if (unit_chunks > (int64_t(1) << 30)) return ffi::Error::InvalidArgument("jaxpaged: write_rows' rows are too wide");
  int group_shift = 0;
  while (group_shift < 5 && (int64_t(1) << group_shift) < unit_chunks) ++group_shift;
  const int64_t warps = (units + (32 >> group_shift) - 1) >> (5 - group_shift);
  const int64_t blocks = (warps + kWriteRowsThreads / 32 - 1) / (kWriteRowsThreads / 32);
  if (blocks > 0x7fffffff) return ffi::Error::InvalidArgument("jaxpaged: write_rows has too many rows for one launch");
  write_rows_kernel<<<unsigned(blocks), kWriteRowsThreads, 0, stream>>>(p, units, int(unit_chunks), group_shift);
  return last_launch_error("write_rows_kernel");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_write_rows_gpu, write_rows_gpu_impl,
                              write_rows_binding().Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
