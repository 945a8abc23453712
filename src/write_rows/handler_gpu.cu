// GPU handler and kernel of the row scatter: one thread per 16-byte chunk of a (row, head), so a
// warp moves 512 contiguous bytes of a row; slots are read once per chunk (cached).
#include "common/gpu_launch.h"
#include "write_rows/ffi_binding.h"

namespace jaxpaged {
namespace {

constexpr int kWriteRowsThreads = 256;

__global__ void __launch_bounds__(kWriteRowsThreads) write_rows_kernel(const WriteRowsParams p) {
  const int64_t chunks = p.row_bytes / 16;
  const int64_t i = int64_t(blockIdx.x) * kWriteRowsThreads + threadIdx.x;
  if (i >= p.num_rows * p.heads * chunks) return;
  const int64_t chunk = i % chunks, row_head = i / chunks;
  const int64_t at = write_rows_offset(p, __ldg(p.slots + row_head / p.heads), row_head % p.heads);
  if (at < 0) return;
  const int4 v = __ldg(reinterpret_cast<const int4*>(static_cast<const char*>(p.rows) + row_head * p.row_bytes) + chunk);
  reinterpret_cast<int4*>(static_cast<char*>(p.cache) + at)[chunk] = v;
}

ffi::Error write_rows_gpu_impl(ffi::AnyBuffer cache, ffi::AnyBuffer rows, ffi::Buffer<ffi::S32> slots,
                               int32_t layout, ffi::Result<ffi::AnyBuffer> out, gpuStream_t stream) {
  WriteRowsParams p;
  JP_RETURN_IF_ERROR(decode_write_rows(cache, rows, slots, layout, out, &p));
  const int64_t threads = p.num_rows * p.heads * (p.row_bytes / 16);
  if (threads == 0) return ffi::Error::Success();
  write_rows_kernel<<<unsigned((threads + kWriteRowsThreads - 1) / kWriteRowsThreads), kWriteRowsThreads, 0,
                      stream>>>(p);
  return last_launch_error("write_rows_kernel");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_write_rows_gpu, write_rows_gpu_impl,
                              write_rows_binding().Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
