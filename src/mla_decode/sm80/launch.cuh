// The launcher of one sm_80 MLA kernel instance (included by one generated translation unit per
// instance, sm80/decode.cu.in).
#pragma once

#include "common/combine_splits.h"
#include "common/gpu_launch.h"
#include "mla_decode/launch.h"
#include "mla_decode/sm80/decode_kernel.cuh"

namespace jaxpaged {

template <typename T, int MT>
ffi::Error launch_mla_sm80(const MlaDecodeParams& p, const MlaWorkspace& w, float* ws, gpuStream_t stream) {
  using L = MlaLayout<MT>;
  const int64_t rows = p.batch * p.s_q * p.num_heads;
  const int64_t row_blocks = (p.s_q * p.num_heads + L::kRows - 1) / L::kRows;
  auto kernel = mla_decode_kernel<T, MT>;
  JP_RETURN_IF_ERROR(allow_smem(kernel, L::kSmemBytes, "mla_decode_kernel (shared memory size)"));
  const int splits = choose_kv_splits(p.batch * row_blocks, w.split_cap, p.max_pages * p.page_size, 256,
                                      resident_blocks(kernel, kMlaThreads, L::kSmemBytes));
  float* ws_out = ws;
  float* ws_lse = ws + int64_t(splits) * rows * kMlaLatentDim;
  dim3 grid(unsigned(p.batch), unsigned(row_blocks), unsigned(splits));
  kernel<<<grid, kMlaThreads, L::kSmemBytes, stream>>>(p, page_shift_of(p.page_size), ws_out, ws_lse);
  JP_RETURN_IF_ERROR(last_launch_error("mla_decode_kernel"));
  if (splits == 1) return ffi::Error::Success();
  return launch_combine_splits<T>(ws_out, ws_lse, splits, rows, kMlaLatentDim, static_cast<T*>(p.out), p.lse,
                                  stream);
}

}  // namespace jaxpaged
