// GPU handler for MLA decode: decodes the call, lays out its workspace for the device it runs on
// (workspace.h) and dispatches to one of three paths (launch.h). No kernel is compiled here.
//   Hopper (compute capability 9 and a build with sm_90a; the cache formats mla_hopper_format
//     names): device-side partition schedule, the wgmma kernel (sm90/), then the merge of cut
//     sequences; also sparse MLA decode's lists (run_mla_sparse_gpu);
//   the portable kernel (portable/): other quantized formats, sparse calls off Hopper;
//   otherwise (sm_80 and later): the mma.sync kernel with static KV splits (sm80/).
#include <algorithm>
#include <type_traits>

#include "common/gpu_launch.h"
#include "mla_decode/ffi_binding.h"
#include "mla_decode/launch.h"
#include "mla_decode/workspace.h"
#if defined(JAXPAGED_WITH_SM90)
#include "mla_decode/sm90/tma_maps.h"
#endif

namespace jaxpaged {

#if !defined(JAXPAGED_WITH_SM90)
int mla_sm90_binary_version() { return 0; }  // this build has no sm_90a kernels
#endif

namespace {

// What the workspace and the path depend on of `device`: its SM count, and whether it is a Hopper
// this build has the sm_90a kernels for (a build for sm_80 only runs its sm_80 code there).
// The image check is the runtime's choice for the current device, so a machine that mixes GPU
// generations should lower per device. Cached per device.
MlaDevice mla_device(int device) {
  if (use_portable_kernels()) return MlaDevice{sm_count(device), false};  // the split layout
  static std::atomic<int> cached[64];  // 1 Hopper path, 2 not
  const int state = per_device(cached, device, [device] {
    int major = 0;
    return gpu::compute_capability_major(&major, device) == gpu::kSuccess && major == 9 &&
                   mla_sm90_binary_version() == 90
               ? 1
               : 2;
  });
  return MlaDevice{sm_count(device), state == 1};
}

#if defined(JAXPAGED_WITH_SM90)
// The narrow fp8 kernel runs where it applies unless JAXPAGED_MLA_FP8_NARROW=0 (then the wgmma
// kernel's converting loader: slower, its fp8 products summed in float32). On by default since
// session 24: the barrier fix of NOTES item 44 d ran on the H100 (stress loop, the GPU fp8/MLA
// tests, memcheck and synccheck) without a failure.
bool mla_fp8_narrow_enabled() {
  static const bool enabled = env_not_zero("JAXPAGED_MLA_FP8_NARROW");
  return enabled;
}

// The wide fp8 kernel likewise (JAXPAGED_MLA_FP8_WIDE=0: the converting loader).
bool mla_fp8_wide_enabled() {
  static const bool enabled = env_not_zero("JAXPAGED_MLA_FP8_WIDE");
  return enabled;
}

// The wide kernel on 656-byte rows likewise (JAXPAGED_MLA_DS_WIDE=0: the converting loader).
bool mla_ds_wide_enabled() {
  static const bool enabled = env_not_zero("JAXPAGED_MLA_DS_WIDE");
  return enabled;
}

// The wgmma kernel instance for p: TMA for 16-bit dense caches with pages of >= 64 tokens, else
// the gathering loader, per sparse lists and cache format (656-byte rows: bf16 queries only); in
// its place the narrow or wide fp8 kernel where one applies (mla_fp8_narrow_applies, mla_fp8_wide_applies),
// or the wide kernel on 656-byte rows (mla_ds_wide_applies: dense, or sparse lists).
template <typename T>
ffi::Error launch_wgmma_for(const MlaDecodeParams& p, int row_blocks, int parts, const MlaSchedule& sched,
                            float* ws_out, float* ws_lse, gpuStream_t stream) {
  MlaTmaMaps maps{};
  auto gather = [&](auto sparse) -> ffi::Error {
    constexpr bool kSparse = decltype(sparse)::value;
    if (p.ds_rows) {
      // (the float16 reading runs the wide kernel; with no pages no key is read, so the reading
      // does not matter)
      if ((p.ds_f16 || mla_ds_fp8_math_shape(p)) && p.num_pages >= 1) {
        return ffi::Error::Internal("jaxpaged: 656-byte rows read as float16 or with fp8_math: the wide kernel's "
                                    "TMA maps failed");
      }
      if constexpr (std::is_same<T, gpu_bf16>::value) {
        return launch_mla_wgmma<T, false, kSparse, kMlaDsRows>(p, row_blocks, parts, sched, ws_out, ws_lse, maps,
                                                              stream);
      }
      return ffi::Error::Internal("jaxpaged: 656-byte rows take the portable kernel with float16 queries");
    }
    if (p.fp8) {
      return launch_mla_wgmma<T, false, kSparse, kMlaFp8>(p, row_blocks, parts, sched, ws_out, ws_lse, maps, stream);
    }
    return launch_mla_wgmma<T, false, kSparse, kMlaSame>(p, row_blocks, parts, sched, ws_out, ws_lse, maps, stream);
  };
  if constexpr (std::is_same<T, gpu_bf16>::value) {
    // (656-byte rows: no fp8 kernel below takes them, so this test may come first; with fp8_math
    // on dense rows the wide kernel's fp8-math mode, launch_mla_ds_wide's choice)
    if (mla_ds_fp8_math_applies(p) || (mla_ds_wide_applies(p) && (mla_ds_wide_enabled() || p.ds_f16))) {
      MlaDsMaps ds{};  // (sparse lists are gathered: their kernel's maps go unread)
      if (p.sparse || make_ds_maps(p, &ds)) {
        return launch_mla_ds_wide(p, row_blocks, parts, sched, ws_out, ws_lse, ds, stream);
      }
    }
  }
  if (p.sparse) return gather(std::true_type{});
  if constexpr (std::is_same<T, gpu_bf16>::value) {
    MlaNarrowMap narrow{};
    if (mla_fp8_narrow_applies(p) && mla_fp8_narrow_enabled() && make_fp8_narrow_map(p, &narrow)) {
      return launch_mla_fp8_narrow(p, parts, sched, ws_out, ws_lse, narrow, stream);
    }
    if (mla_fp8_wide_applies(p) && mla_fp8_wide_enabled() && make_fp8_narrow_map(p, &narrow)) {
      return launch_mla_fp8_wide(p, row_blocks, parts, sched, ws_out, ws_lse, narrow, stream);
    }
  }
  if (!mla_quantized(p) && make_tma_maps<T>(p, &maps)) {
    return launch_mla_wgmma<T, true, false, kMlaSame>(p, row_blocks, parts, sched, ws_out, ws_lse, maps, stream);
  }
  return gather(std::false_type{});
}

// plan: a schedule the plan op made for this call (mla_plan_for), or null: make it here.
template <typename T>
ffi::Error launch_hopper(const MlaDecodeParams& call, const MlaWorkspace& w, float* ws, const int32_t* plan,
                         gpuStream_t stream) {
  MlaDecodeParams p = call;
  const bool chained = dependent_launches();
  // The merge may launch as the attention kernel starts when its grid is large enough to spread
  // over the SMs as they free up (two blocks per SM); a smaller one (B = 1-2 long sequences: ~128
  // blocks of 512 threads, each reading ~66 pieces) would pile onto the first SMs to free and
  // measured 5% slower per layer at B = 1 (NOTES item 46).
  p.early_dependents = chained && mla_merge_blocks(p, w.parts) >= 2 * int64_t(sm_count(current_device()));
  const int64_t rows_per_b = p.s_q * p.num_heads;
  const int64_t row_blocks = (rows_per_b + kMlaWgRows - 1) / kMlaWgRows;
  // (the kernels only read a plan)
  int* words = plan != nullptr ? const_cast<int*>(plan) : reinterpret_cast<int*>(ws);
  const MlaSchedule sched = MlaSchedule::at(words, w.parts, p.batch);
  float* ws_out = ws + w.schedule_floats;
  float* ws_lse = ws_out + 2 * w.parts * rows_per_b * kMlaLatentDim;
  p.dependent_attention = chained && plan == nullptr;
  if (plan == nullptr) JP_RETURN_IF_ERROR(launch_mla_schedule(p, w.parts, sched, 0, stream));
  JP_RETURN_IF_ERROR(launch_wgmma_for<T>(p, int(row_blocks), w.parts, sched, ws_out, ws_lse, stream));
  return launch_mla_merge<T>(p, w.parts, sched, ws_out, ws_lse, stream);
}
#endif

ffi::Error mla_decode_gpu_impl(ffi::AnyBuffer q_nope, ffi::AnyBuffer q_pe, ffi::AnyBuffer ckv,
                               ffi::AnyBuffer kpe, ffi::Buffer<ffi::S32> kv_lens,
                               ffi::Buffer<ffi::S32> block_tables, ffi::Buffer<ffi::S32> options,
                               ffi::Buffer<ffi::S32> plan, float scale, float kv_scale, int32_t ds_read, int32_t fp8_math,
                               int32_t causal, int32_t plan_rows, int32_t plan_capacity, ffi::Result<ffi::AnyBuffer> out,
                               ffi::Result<ffi::Buffer<ffi::F32>> lse, ffi::Result<ffi::Buffer<ffi::F32>> workspace,
                               gpuStream_t stream) {
  MlaDecodeParams p;
  JP_RETURN_IF_ERROR(decode_mla_decode(q_nope, q_pe, ckv, kpe, kv_lens, block_tables, options, scale, kv_scale, ds_read, fp8_math,
                                       causal, out, lse, &p));
  return run_mla_decode_gpu(p, q_nope.element_type(), workspace->typed_data(), int64_t(workspace->element_count()),
                            stream, mla_plan_for(p, plan, plan_rows, plan_capacity));
}

ffi::Error mla_decode_plan_gpu_impl(ffi::Buffer<ffi::S32> kv_lens, int32_t rows, int32_t capacity,
                                    ffi::Result<ffi::Buffer<ffi::S32>> plan,
                                    ffi::Result<ffi::Buffer<ffi::F32>> /*workspace: none*/, gpuStream_t stream) {
  const int64_t batch = int64_t(kv_lens.element_count());
  JP_RETURN_IF_ERROR(check_dim(int64_t(plan->element_count()), mla_plan_ints(batch), "plan size"));
  return run_mla_plan_gpu(kv_lens.typed_data(), batch, rows, capacity, plan->typed_data(), stream);
}

}  // namespace

ffi::Error run_mla_decode_gpu(const MlaDecodeParams& p, ffi::DataType dtype, float* ws, int64_t ws_floats,
                              gpuStream_t stream, const int32_t* plan) {
  if (p.batch * p.s_q * p.num_heads == 0) return ffi::Error::Success();
  const MlaWorkspace w = MlaWorkspace::of(p, mla_device(current_device()));
  if (ws_floats < w.floats) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: mla_decode workspace smaller than this device's path needs (lowered for another device?)");
  }
  return with_gpu_dtype(dtype, "mla_decode", [&](auto t) -> ffi::Error {
    using T = decltype(t);
#if defined(JAXPAGED_WITH_SM90)
    if (w.hopper) return launch_hopper<T>(p, w, ws, plan, stream);
#endif
    (void)plan;  // (the other paths have no partition schedule)
    // (the formats the Hopper kernel does not read, and every format on other GPUs)
    if (use_portable_kernels() || mla_quantized(p)) return launch_mla_portable<T>(p, w, ws, stream);
#if defined(JAXPAGED_VENDOR_HIP)
    return ffi::Error::Internal("jaxpaged: unreachable (a ROCm build runs the portable kernels)");
#else
    return mla_row_tiles(p.s_q * p.num_heads) == 4 ? launch_mla_sm80<T, 4>(p, w, ws, stream)
                                                   : launch_mla_sm80<T, 1>(p, w, ws, stream);
#endif
  });
}

ffi::Error run_mla_sparse_gpu(const MlaDecodeParams& p, const int32_t* indices, const int32_t* topk_lens, int64_t topk,
                              ffi::DataType dtype, float* ws, int64_t ws_floats, gpuStream_t stream,
                              const int32_t* plan) {
  if (p.batch * p.s_q * p.num_heads == 0) return ffi::Error::Success();
  const MlaDecodeParams lists = mla_sparse_as_lists(p, indices, topk_lens, topk);
  const MlaWorkspace w = MlaWorkspace::of(lists, mla_device(current_device()));
  if (ws_floats < w.floats) {
    return ffi::Error::InvalidArgument(
        "jaxpaged: mla_decode_sparse workspace smaller than this device's path needs (lowered for another device?)");
  }
  return with_gpu_dtype(dtype, "mla_decode_sparse", [&](auto t) -> ffi::Error {
    using T = decltype(t);
#if defined(JAXPAGED_WITH_SM90)
    if (w.hopper) return launch_hopper<T>(lists, w, ws, plan, stream);
#endif
    (void)plan;  // (the portable kernel has no partition schedule)
    return launch_mla_sparse_portable<T>(p, indices, topk_lens, topk, stream);
  });
}

ffi::Error run_mla_plan_gpu(const int32_t* kv_lens, int64_t batch, int64_t rows, int64_t capacity, int32_t* plan,
                            gpuStream_t stream) {
  if (rows < 1 || capacity < 0) return ffi::Error::InvalidArgument("jaxpaged: mla_decode_plan needs rows >= 1, capacity >= 0");
#if defined(JAXPAGED_WITH_SM90)
  const MlaDevice dev = mla_device(current_device());
  if (dev.hopper) {
    MlaDecodeParams p{};
    p.batch = batch;
    p.s_q = 1;
    p.num_heads = rows;
    p.kv_lens = kv_lens;
    p.max_pages = capacity;  // (capacity = max_pages x page_size is all the schedule reads of them)
    p.page_size = 1;
    const int parts = mla_num_partitions(dev.sms, (rows + kMlaWgRows - 1) / kMlaWgRows);
    return launch_mla_schedule(p, parts, MlaSchedule::at(plan, parts, batch), mla_plan_ints(batch), stream);
  }
#else
  (void)kv_lens;
#endif
  // Off the Hopper path no kernel reads a plan: zeros, as the CPU's.
  const gpu::Error err = gpu::memset_async(plan, 0, size_t(mla_plan_ints(batch)) * sizeof(int32_t), stream);
  if (err == gpu::kSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxpaged: clearing mla_decode_plan's output failed: ") +
                              gpu::error_string(err));
}

int64_t mla_decode_workspace_bytes(const MlaDecodeParams& shapes, int device) {
  int64_t most = 0;
  for_each_device(device, [&](int d) { most = std::max(most, MlaWorkspace::of(shapes, mla_device(d)).floats); });
  return most * int64_t(sizeof(float));
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_mla_decode_gpu, mla_decode_gpu_impl,
                              mla_decode_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // workspace (workspace.h)
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(jaxpaged_mla_decode_plan_gpu, mla_decode_plan_gpu_impl,
                              mla_decode_plan_binding()
                                  .Ret<ffi::Buffer<ffi::F32>>()  // workspace (none: one word)
                                  .Ctx<ffi::PlatformStream<gpuStream_t>>(),
                              {ffi::Traits::kCmdBufferCompatible});

}  // namespace jaxpaged
