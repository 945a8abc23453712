// The MLA-decode launchers the GPU handler picks from. Each kernel is compiled in one translation
// unit: sm80/decode.cu.in and sm90/wgmma.cu.in (one generated unit per instance), schedule.cu.
#pragma once

#include "common/ffi_helpers.h"
#include "gpu_vendor.h"
#include "mla_decode/params.h"
#include "mla_decode/workspace.h"

namespace jaxpaged {

struct MlaTmaMaps;    // sm90/tma_maps.h
struct MlaNarrowMap;  // sm90/tma_maps.h
struct MlaDsMaps;     // sm90/tma_maps.h

// sm_80 path: the mma.sync kernel with 16 * MT query rows per block and static KV splits, then
// the merge of the splits. sm80/launch.cuh.
template <typename T, int MT>
ffi::Error launch_mla_sm80(const MlaDecodeParams& p, const MlaWorkspace& w, float* ws, gpuStream_t stream);

// Hopper path, in three launches: the partition schedule (schedule.cu), the wgmma kernel
// (sm90/launch.cuh; maps only read with kTma), the merge of cut sequences (schedule.cu).
// clear_ints > 0: first zero that many words from sched.header (the plan op's whole array).
ffi::Error launch_mla_schedule(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, int64_t clear_ints,
                               gpuStream_t stream);
template <typename T, bool kTma, bool kSparse, int kFmt>
ffi::Error launch_mla_wgmma(const MlaDecodeParams& p, int row_blocks, int parts, const MlaSchedule& sched,
                            float* ws_out, float* ws_lse, const MlaTmaMaps& maps, gpuStream_t stream);
// The narrow fp8 kernel in place of the wgmma kernel, unless JAXPAGED_MLA_FP8_NARROW=0
// (sm90/fp8_narrow.cuh: bf16 queries, at most 16 query rows per sequence, a combined per-tensor
// fp8 cache in pages of >= 64 tokens; mla_fp8_narrow_applies), on the same schedule and
// workspace. sm90/fp8_narrow.cu.
ffi::Error launch_mla_fp8_narrow(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, float* ws_out,
                                 float* ws_lse, const MlaNarrowMap& map, gpuStream_t stream);
// The wide fp8 kernel in place of the wgmma kernel, unless JAXPAGED_MLA_FP8_WIDE=0
// (sm90/fp8_wide.cuh: bf16 queries, more than 16 query rows per sequence, a combined per-tensor
// fp8 cache in pages of >= 64 tokens; mla_fp8_wide_applies), on the same grid, schedule and
// workspace as the wgmma kernel. sm90/fp8_wide.cu.
ffi::Error launch_mla_fp8_wide(const MlaDecodeParams& p, int row_blocks, int parts, const MlaSchedule& sched,
                               float* ws_out, float* ws_lse, const MlaNarrowMap& map, gpuStream_t stream);
// The wide kernel on 656-byte rows read with bf16 dequantization (fp8_wide.cuh's kDs, NOTES item 49): where
// mla_ds_wide_applies, unless JAXPAGED_MLA_DS_WIDE=0. sm90/fp8_wide.cu.
ffi::Error launch_mla_ds_wide(const MlaDecodeParams& p, int row_blocks, int parts, const MlaSchedule& sched,
                              float* ws_out, float* ws_lse, const MlaDsMaps& maps, gpuStream_t stream);
template <typename T>
ffi::Error launch_mla_merge(const MlaDecodeParams& p, int parts, const MlaSchedule& sched, const float* ws_out,
                            const float* ws_lse, gpuStream_t stream);
// The merge kernel's grid (blocks) for a call with these shapes.
int64_t mla_merge_blocks(const MlaDecodeParams& p, int parts);
// The three are chained as dependent launches unless JAXPAGED_PDL=0 (dependent_launches,
// launch_chained): each kernel pdl_wait()s before touching memory (the merge reads the schedule
// words first: schedule.cu says why that is safe), the schedule kernel lets the attention kernel
// launch at once (without a plan; MlaDecodeParams::dependent_attention), the attention kernel lets the merge launch at its start or at its blocks' exit
// (MlaDecodeParams::early_dependents), and the merge's blocks with nothing to merge exit without
// waiting (all but block 0, which keeps the merge from finishing before the attention kernel).

// The architecture of the sm_90a kernel image the runtime would run on the current device (90),
// or 0 when there is none (a build without sm_90a, or another GPU). sm90/launch.cuh.
int mla_sm90_binary_version();

// The portable path (portable/kernel.cuh: CUDA cores, no inline assembly; what a ROCm build runs,
// and the NVIDIA build with JAXPAGED_PORTABLE_KERNELS=1) on the sm_80 workspace layout, then the
// merge of KV splits. portable/launch.cu.
template <typename T>
ffi::Error launch_mla_portable(const MlaDecodeParams& p, const MlaWorkspace& w, float* ws, gpuStream_t stream);

// Sparse MLA decode (mla_decode_sparse) off the Hopper path: the portable kernel over each query
// row's index list, one split, no workspace. portable/launch.cu.
template <typename T>
ffi::Error launch_mla_sparse_portable(const MlaDecodeParams& p, const int32_t* indices, const int32_t* topk_lens,
                                      int64_t topk, gpuStream_t stream);

// What the GPU handler does once the call is decoded: lay out the workspace for the current device
// (ws_floats words at ws), pick the path and instance for q's dtype, launch; plan: a schedule from
// the plan op made for this call (mla_plan_for), or null. handler_gpu.cu; also the entry point of
// tools/sanitize_driver.cu, which runs the kernels without JAX.
ffi::Error run_mla_decode_gpu(const MlaDecodeParams& p, ffi::DataType dtype, float* ws, int64_t ws_floats,
                              gpuStream_t stream, const int32_t* plan = nullptr);
// The plan op (jaxpaged.mla_decode_plan): the partition schedule the Hopper path would make on the
// current device for calls with these kv_lens (device memory), query rows (s_q x Hq) and capacity
// (max_pages x page_size), into plan [mla_plan_ints(batch)] (the words past it zeroed); one kernel
// per serving step instead of one per layer. handler_gpu.cu.
ffi::Error run_mla_plan_gpu(const int32_t* kv_lens, int64_t batch, int64_t rows, int64_t capacity, int32_t* plan,
                            gpuStream_t stream);
// The same for sparse MLA decode (p: the op's queries and caches; handler_gpu.cu): the Hopper
// kernel over the index lists (mla_sparse_as_lists) where it reads the format, else the portable one.
// plan: a schedule made for these lists (mla_sparse_plan_for), or null.
ffi::Error run_mla_sparse_gpu(const MlaDecodeParams& p, const int32_t* indices, const int32_t* topk_lens, int64_t topk,
                              ffi::DataType dtype, float* ws, int64_t ws_floats, gpuStream_t stream,
                              const int32_t* plan = nullptr);

}  // namespace jaxpaged
