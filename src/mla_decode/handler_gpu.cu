// GPU handler for MLA decode: decodes the call and runs one of two kernel paths:
//   Hopper (sm_90a image on a compute-capability 9 device): device-side partition schedule, the
//     wgmma kernel, then the merge of cut sequences (partition_schedule.cuh, wgmma_kernel.cuh);
//   otherwise (sm_80 and later): the mma.sync kernel with static KV splits (decode_kernel.cuh).
#include "common/combine_splits.cuh"
#include "common/gpu_launch.h"
#include "common/tensor_map_host.h"
#include "mla_decode/decode_kernel.cuh"
#include "mla_decode/ffi_binding.h"
#include "mla_decode/partition_schedule.cuh"
#include "mla_decode/wgmma_kernel.cuh"

namespace jaxpaged {
namespace {

template <typename T, int MT>
ffi::Error launch(const MlaDecodeParams& p, float* ws, int64_t ws_floats, gpuStream_t stream) {
  using L = MlaLayout<MT>;
  const int64_t rows = p.batch * p.s_q * p.num_heads;
  const int64_t row_blocks = (p.s_q * p.num_heads + L::kRows - 1) / L::kRows;
  const int64_t per_split = rows * (kMlaLatentDim + 1);
  const int cap = ws_floats >= per_split ? int(ws_floats / per_split) : 1;
  auto kernel = mla_decode_kernel<T, MT>;
  // Above 48 KiB, dynamic shared memory must be opted into (per device, so on every launch).
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(L::kSmemBytes)) !=
      gpuSuccess) {
    return last_launch_error("mla_decode_kernel (shared memory size)");
  }
  const int splits = choose_kv_splits(p.batch * row_blocks, cap < kMaxSplits ? cap : kMaxSplits,
                                      p.max_pages * p.page_size, 256,
                                      resident_blocks(kernel, kMlaThreads, L::kSmemBytes));
  float* ws_out = ws;
  float* ws_lse = ws + int64_t(splits) * rows * kMlaLatentDim;
  dim3 grid(unsigned(p.batch), unsigned(row_blocks), unsigned(splits));
  kernel<<<grid, kMlaThreads, L::kSmemBytes, stream>>>(p, page_shift_of(p.page_size), ws_out, ws_lse);
  JP_RETURN_IF_ERROR(last_launch_error("mla_decode_kernel"));
  if (splits > 1) {
    combine_splits_kernel<T><<<unsigned(rows), kCombineThreads, 0, stream>>>(
        ws_out, ws_lse, splits, rows, kMlaLatentDim, static_cast<T*>(p.out), p.lse);
    JP_RETURN_IF_ERROR(last_launch_error("combine_splits_kernel"));
  }
  return ffi::Error::Success();
}

// Floats of workspace the Hopper path needs: the schedule's int32 arrays (rounded to 16 bytes),
// then two partial results (512 floats + lse) per partition and query row of a sequence.
// jaxpaged/mla_decode.py mirrors this with the largest partition count.
inline int64_t hopper_schedule_floats(int64_t parts, int64_t batch) {
  return (MlaSchedule::ints(parts, batch) + 3) / 4 * 4;
}
inline int64_t hopper_workspace_floats(int64_t parts, int64_t batch, int64_t rows_per_b) {
  return hopper_schedule_floats(parts, batch) + 2 * parts * rows_per_b * (kMlaLatentDim + 1);
}

// The TMA loader's maps of the cache (ckv and kpe, each [pages][page_size][width] with the call's
// strides, boxes of 64 tokens x 64 columns). TMA needs pages of >= 64 tokens (a tile is then one
// box per column block); false otherwise or if the driver refuses a map.
template <typename T>
bool make_tma_maps(const MlaDecodeParams& p, MlaTmaMaps* maps) {
  if (p.page_size < kMlaTileKeys || p.num_pages < 1) return false;
  constexpr bool bf16 = std::is_same<T, gpu_bf16>::value;
  const uint64_t e = sizeof(T);
  const uint32_t box[3] = {64, uint32_t(kMlaTileKeys), 1};
  const uint64_t pages = uint64_t(p.num_pages), slots = uint64_t(p.page_size);
  return encode_tensor_map_3d(&maps->ckv, bf16, p.ckv, {uint64_t(kMlaLatentDim), slots, pages},
                              {uint64_t(p.ckv_slot_stride) * e, uint64_t(p.ckv_page_stride) * e}, box) &&
         encode_tensor_map_3d(&maps->kpe, bf16, p.kpe, {uint64_t(kMlaRopeDim), slots, pages},
                              {uint64_t(p.kpe_slot_stride) * e, uint64_t(p.kpe_page_stride) * e}, box);
}

template <typename T, bool kTma>
ffi::Error launch_wgmma(const MlaDecodeParams& p, int row_blocks, int parts, const MlaSchedule& sched,
                        float* ws_out, float* ws_lse, const MlaTmaMaps& maps, gpuStream_t stream) {
  auto kernel = mla_wgmma_kernel<T, kTma>;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(MlaWgSmem::kAllocBytes)) != gpuSuccess) {
    return last_launch_error("mla_wgmma_kernel (shared memory size)");
  }
  kernel<<<unsigned(parts * row_blocks), kMlaWgThreads, MlaWgSmem::kAllocBytes, stream>>>(
      p, page_shift_of(p.page_size), row_blocks, sched, ws_out, ws_lse, maps);
  return last_launch_error("mla_wgmma_kernel");
}

template <typename T, int Split>
ffi::Error launch_merge(const MlaDecodeParams& p, const MlaSchedule& sched, const float* ws_out,
                        const float* ws_lse, gpuStream_t stream) {
  constexpr int rows = mla_merge_rows(Split);
  const int64_t rows_per_b = p.s_q * p.num_heads;
  const dim3 grid(unsigned(p.batch * ((rows_per_b + rows - 1) / rows)), kMlaMergeQuarters);
  mla_merge_pieces_kernel<T, Split><<<grid, kMlaMergeThreads, 0, stream>>>(p, sched, ws_out, ws_lse);
  return last_launch_error("mla_merge_pieces_kernel");
}

template <typename T>
ffi::Error launch_hopper(const MlaDecodeParams& p, float* ws, int64_t ws_floats, gpuStream_t stream) {
  const int64_t rows_per_b = p.s_q * p.num_heads;
  const int64_t row_blocks = (rows_per_b + kMlaWgRows - 1) / kMlaWgRows;
  const int parts = mla_num_partitions(sm_count(), row_blocks);
  if (ws_floats < hopper_workspace_floats(parts, p.batch, rows_per_b)) {
    return ffi::Error::Internal("jaxpaged: mla_decode workspace smaller than the Hopper path needs");
  }
  const MlaSchedule sched = MlaSchedule::at(reinterpret_cast<int*>(ws), parts, p.batch);
  float* ws_out = ws + hopper_schedule_floats(parts, p.batch);
  float* ws_lse = ws_out + 2 * parts * rows_per_b * kMlaLatentDim;

  mla_schedule_kernel<<<1, kMlaScheduleThreads, 0, stream>>>(p, parts, sched);
  JP_RETURN_IF_ERROR(last_launch_error("mla_schedule_kernel"));
  MlaTmaMaps maps{};
  if (make_tma_maps<T>(p, &maps)) {
    JP_RETURN_IF_ERROR((launch_wgmma<T, true>(p, int(row_blocks), parts, sched, ws_out, ws_lse, maps, stream)));
  } else {
    JP_RETURN_IF_ERROR((launch_wgmma<T, false>(p, int(row_blocks), parts, sched, ws_out, ws_lse, maps, stream)));
  }
  if (mla_merge_split(p.batch, parts) == 4) return launch_merge<T, 4>(p, sched, ws_out, ws_lse, stream);
  return launch_merge<T, 1>(p, sched, ws_out, ws_lse, stream);
}

// True when the current device is a Hopper and this build carries the sm_90a kernel image
// (a build for sm_80 only runs its sm_80 code there). Cached per device.
inline bool use_hopper_path() {
  static int cached[64];  // 0 unknown, 1 yes, 2 no
  int device = 0;
  if (gpuGetDevice(&device) != gpuSuccess || device < 0 || device >= 64) return false;
  if (cached[device] == 0) {
    int major = 0;
    cudaFuncAttributes attr{};
    const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == gpuSuccess &&
                    cudaFuncGetAttributes(&attr, mla_wgmma_kernel<gpu_bf16, false>) == gpuSuccess;
    cached[device] = ok && major == 9 && attr.binaryVersion == 90 ? 1 : 2;
  }
  return cached[device] == 1;
}

template <typename T>
ffi::Error dispatch_rows(const MlaDecodeParams& p, float* ws, int64_t n, gpuStream_t s) {
  if (use_hopper_path()) return launch_hopper<T>(p, ws, n, s);
  return mla_row_tiles(p.s_q * p.num_heads) == 4 ? launch<T, 4>(p, ws, n, s) : launch<T, 1>(p, ws, n, s);
}

ffi::Error mla_decode_gpu_impl(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv,
                               ffi::AnyBuffer kpe, ffi::Buffer<ffi::S32> kv_lens,
                               ffi::Buffer<ffi::S32> block_tables, float scale, int32_t causal,
                               ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::Buffer<ffi::F32>> lse,
                               ffi::Result<ffi::Buffer<ffi::F32>> workspace, gpuStream_t stream) {
  MlaDecodeParams p;
  JP_RETURN_IF_ERROR(decode_mla_decode(q_nope, q_pe, ckv, kpe, kv_lens, block_tables, scale, causal,
                                       out, lse, &p));
  if (p.batch * p.s_q * p.num_heads == 0) return ffi::Error::Success();
  float* ws = workspace->typed_data();
  const int64_t ws_floats = int64_t(workspace->element_count());
  switch (q_nope.element_type()) {
    case ffi::DataType::F16: return dispatch_rows<gpu_half>(p, ws, ws_floats, stream);
    case ffi::DataType::BF16: return dispatch_rows<gpu_bf16>(p, ws, ws_floats, stream);
    default:
      return ffi::Error::InvalidArgument("jaxpaged: GPU mla_decode supports float16 and bfloat16");
  }
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_mla_decode_gpu, mla_decode_gpu_impl,
                              mla_decode_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // split-KV workspace
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
