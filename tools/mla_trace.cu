// The Hopper MLA kernel's timeline (NOTES item 53): runs one dense MLA decode (bf16, combined
// 576-wide cache, 64-token pages; by default Hq = 128, B = 64, 4096 keys: the bench's
// mla_h128_b64_ctx4k) with the kernels built with JAXPAGED_MLA_TRACE, and writes the records of
// blocks 0 and 1 (src/mla_decode/sm90/trace.cuh: uint64 id << 48 | clock64, per block and role)
// to a file for tools/mla_trace_report.py.
//
//   cmake -S . -B build/trace -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_MLA_TRACE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a
//   ninja -C build/trace jaxpaged_mla_trace
//   build/trace/jaxpaged_mla_trace trace.bin [heads batch kv_len [pool_pages]]
// pool_pages (default: every page its own): the block table names only that many distinct pages
// (e.g. 128 = 9 MB, resident in L2), so the same shape runs with its tiles served from L2.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "mla_decode/launch.h"
#include "mla_decode/sm90/trace.cuh"
#include "driver_buffers.h"

using jaxpaged_tools::Device;
using jaxpaged_tools::random_bf16;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.bin [heads batch kv_len [pool_pages]]\n", argv[0]);
    return 2;
  }
  const int heads = argc > 2 ? std::atoi(argv[2]) : 128, B = argc > 3 ? std::atoi(argv[3]) : 64;
  const int kv_len = argc > 4 ? std::atoi(argv[4]) : 4096, page = 64, row = 576;
  const int pages_per_seq = (kv_len + page - 1) / page, num_pages = B * pages_per_seq;
  std::mt19937 rng(7);
  std::vector<int32_t> table(num_pages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const int pool = argc > 5 ? std::max(1, std::min(std::atoi(argv[5]), num_pages)) : num_pages;
  for (int i = 0; i < num_pages; ++i) table[i] %= pool;  // (pages >= pool never read)
  const size_t rows = size_t(B) * heads;
  Device<__nv_bfloat16> q_nope(random_bf16(rows * 512, rng)), q_pe(random_bf16(rows * 64, rng));
  Device<__nv_bfloat16> cache(random_bf16(size_t(num_pages) * page * row, rng));
  Device<int32_t> lens(std::vector<int32_t>(B, kv_len)), d_table(table);
  Device<__nv_bfloat16> out(rows * 512);
  Device<float> lse(rows);
  const size_t trace_words = size_t(2) * 3 * jaxpaged::kMlaTraceEvents;
  Device<uint64_t> trace(trace_words);

  jaxpaged::MlaDecodeParams p{};
  p.q_nope = q_nope.ptr;
  p.q_pe = q_pe.ptr;
  p.ckv = cache.ptr;
  p.kpe = cache.ptr + 512;
  p.kv_lens = lens.ptr;
  p.block_tables = d_table.ptr;
  p.out = out.ptr;
  p.lse = lse.ptr;
  p.batch = B;
  p.s_q = 1;
  p.num_heads = heads;
  p.max_pages = pages_per_seq;
  p.num_pages = num_pages;
  p.page_size = page;
  p.ckv_slot_stride = p.kpe_slot_stride = row;
  p.ckv_page_stride = p.kpe_page_stride = int64_t(page) * row;
  p.scale = 1.f / std::sqrt(192.f);
  p.kv_scale = 1.f;
  p.q_bf16 = true;
  const int64_t ws_floats = jaxpaged::mla_decode_workspace_bytes(p, -1) / 4;
  Device<float> ws(static_cast<size_t>(ws_floats));
  cudaEvent_t ev[2];
  cudaEventCreate(&ev[0]);
  cudaEventCreate(&ev[1]);
  float last_ms = 0.f;
  for (int call = 0; call < 3; ++call) {  // the last call's records are kept
    cudaMemset(trace.ptr, 0, trace_words * 8);
    p.trace = call == 2 ? trace.ptr : nullptr;
    cudaEventRecord(ev[0]);
    auto err = jaxpaged::run_mla_decode_gpu(p, jaxpaged::ffi::DataType::BF16, ws.ptr, ws_floats, nullptr);
    cudaEventRecord(ev[1]);
    const cudaError_t sync = cudaDeviceSynchronize();
    cudaEventElapsedTime(&last_ms, ev[0], ev[1]);
    if (!err.success() || sync != cudaSuccess) {
      std::fprintf(stderr, "call %d failed: %s\n", call, err.success() ? cudaGetErrorString(sync) : err.message().c_str());
      return 1;
    }
  }
  std::vector<uint64_t> host(trace_words);
  cudaMemcpy(host.data(), trace.ptr, trace_words * 8, cudaMemcpyDeviceToHost);
  FILE* f = std::fopen(argv[1], "wb");
  std::fwrite(host.data(), 8, host.size(), f);
  std::fclose(f);
  std::printf("heads %d batch %d kv_len %d pool %d pages: traced call %.1f us; %zu records written to %s\n", heads, B,
              kv_len, pool, 1e3 * last_ms,
              size_t(std::count_if(host.begin(), host.end(), [](uint64_t w) { return w != 0; })), argv[1]);
  return 0;
}
