// GPU handler for paged attention: decodes the call, picks the kernel instance (dtype, head dim,
// with or without the large-tile path) and the KV split count, lists the tiles on the device,
// launches, and merges splits.
// One tensor-core kernel (tile_kernel.cuh) serves decode and ragged prefill alike.
#include "common/combine_splits.cuh"
#include "common/gpu_launch.h"
#include "paged_attention/ffi_binding.h"
#include "paged_attention/tile_kernel.cuh"
#include "paged_attention/tile_schedule.cuh"

namespace jaxpaged {
namespace {

template <typename T, int D, bool LARGE>
ffi::Error launch_tiles(const PagedAttentionParams& p, float* ws, int64_t ws_floats, gpuStream_t stream) {
  using C = TileConfig<D, LARGE>;
  const int64_t group = p.num_q_heads / p.num_kv_heads;
  const int64_t rows = p.num_tokens * p.num_q_heads;
  // The tile list sits at the front of the workspace (jaxpaged/paged_attention.py sizes it).
  const int64_t work_cap = tile_list_capacity(p.num_tokens, group, p.num_seqs);
  if (ws_floats < 2 * (work_cap + 1) || work_cap >= kLargeTileFlag) {
    return ffi::Error::InvalidArgument("jaxpaged: paged_attention workspace too small for the tile list");
  }
  int32_t* work = reinterpret_cast<int32_t*>(ws);
  ws += 2 * (work_cap + 1);
  ws_floats -= 2 * (work_cap + 1);
  // Pure decode knows its tile count (every sequence has `group` rows); a ragged call launches for
  // the list's capacity and blocks past the list's end return at once.
  const int64_t tiles = p.decode_only ? p.num_seqs * tiles_of_rows(group) : work_cap;
  const int64_t blocks = tiles * p.num_kv_heads;
  if (blocks > 0x7FFFFFFF) {
    return ffi::Error::InvalidArgument("jaxpaged: paged_attention needs more thread blocks than a grid holds (2^31 - 1)");
  }
  auto kernel = paged_tile_kernel<T, D, LARGE>;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes)) != gpuSuccess) {
    return last_launch_error("paged_tile_kernel (shared memory size)");
  }
  const int cap = ws_floats >= rows * (D + 1) ? int(ws_floats / (rows * (D + 1))) : 1;
  const int splits = choose_kv_splits(blocks, cap < kMaxSplits ? cap : kMaxSplits, p.max_pages * p.page_size, 256,
                                      resident_blocks(kernel, kTileThreads, C::kSmemBytes));
  float* ws_out = ws;
  float* ws_lse = ws + int64_t(splits) * rows * D;
  // Pure decode has no padding rows: only the list block runs.
  const int64_t grid = 1 + (p.decode_only ? 0 : (p.num_tokens + kPaddingRowsPerBlock - 1) / kPaddingRowsPerBlock);
  paged_tile_schedule_kernel<T><<<unsigned(grid), kScheduleThreads, 0, stream>>>(p, work, work_cap, splits, ws_lse);
  JP_RETURN_IF_ERROR(last_launch_error("paged_tile_schedule_kernel"));
  kernel<<<dim3(unsigned(blocks), unsigned(splits)), kTileThreads, C::kSmemBytes, stream>>>(
      p, page_shift_of(p.page_size), work, ws_out, ws_lse);
  JP_RETURN_IF_ERROR(last_launch_error("paged_tile_kernel"));
  if (splits > 1) {
    combine_splits_kernel<T><<<unsigned(rows), kCombineThreads, 0, stream>>>(
        ws_out, ws_lse, splits, rows, D, static_cast<T*>(p.out), p.lse);
    JP_RETURN_IF_ERROR(last_launch_error("combine_splits_kernel"));
  }
  return ffi::Error::Success();
}

// The instance without the large-tile path serves pure decode with a GQA group of at most 16.
template <typename T, int D>
ffi::Error launch_tiles_for(const PagedAttentionParams& p, float* ws, int64_t n, gpuStream_t s) {
  const bool large = !p.decode_only || is_large_tile(p.num_q_heads / p.num_kv_heads);
  return large ? launch_tiles<T, D, true>(p, ws, n, s) : launch_tiles<T, D, false>(p, ws, n, s);
}

template <typename T>
ffi::Error dispatch_dim(const PagedAttentionParams& p, float* ws, int64_t n, gpuStream_t s) {
  switch (p.head_dim) {
    case 64: return launch_tiles_for<T, 64>(p, ws, n, s);
    case 128: return launch_tiles_for<T, 128>(p, ws, n, s);
    case 256: return launch_tiles_for<T, 256>(p, ws, n, s);
    default:
      return ffi::Error::InvalidArgument("jaxpaged: GPU paged_attention supports head dims 64, 128, 256");
  }
}

ffi::Error paged_attention_gpu_impl(ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                                    ffi::Buffer<ffi::S32> kv_lens, ffi::Buffer<ffi::S32> block_tables,
                                    ffi::Buffer<ffi::S32> cu_q_lens, float scale, float soft_cap,
                                    int32_t sliding_window, int32_t kv_layout, int32_t decode_only,
                                    ffi::Result<ffi::AnyBuffer> out,
                                    ffi::Result<ffi::Buffer<ffi::F32>> lse,
                                    ffi::Result<ffi::Buffer<ffi::F32>> workspace, gpuStream_t stream) {
  PagedAttentionParams p;
  JP_RETURN_IF_ERROR(decode_paged_attention(q, k, v, kv_lens, block_tables, cu_q_lens, scale,
                                            soft_cap, sliding_window, kv_layout, decode_only, out,
                                            lse, &p));
  if (p.num_tokens == 0) return ffi::Error::Success();
  float* ws = workspace->typed_data();
  const int64_t ws_floats = int64_t(workspace->element_count());
  switch (q.element_type()) {
    case ffi::DataType::F16: return dispatch_dim<gpu_half>(p, ws, ws_floats, stream);
    case ffi::DataType::BF16: return dispatch_dim<gpu_bf16>(p, ws, ws_floats, stream);
    default:
      return ffi::Error::InvalidArgument("jaxpaged: GPU paged_attention supports float16 and bfloat16");
  }
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_paged_attention_gpu, paged_attention_gpu_impl,
                              paged_attention_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // split-KV workspace
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
