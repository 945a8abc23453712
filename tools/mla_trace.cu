// The Hopper MLA kernel's timeline (NOTES item 53): runs one dense MLA decode (bf16, combined
// 576-wide cache, 64-token pages; by default Hq = 128, B = 64, 4096 keys: the bench's
// mla_h128_b64_ctx4k) with the kernels built with JAXPAGED_MLA_TRACE, and writes the records of
// blocks 0 and 1 (src/mla_decode/sm90/trace.cuh: uint64 id << 48 | clock64, per block and role)
// to a file for tools/mla_trace_report.py.
//
//   cmake -S . -B build/trace -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_MLA_TRACE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a
//   ninja -C build/trace jaxpaged_mla_trace
//   build/trace/jaxpaged_mla_trace trace.bin [heads batch kv_len]
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

namespace {

template <typename T>
T* to_device(const std::vector<T>& host) {
  T* d = nullptr;
  cudaMalloc(&d, host.size() * sizeof(T));
  cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

std::vector<__nv_bfloat16> uniform(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = __float2bfloat16(u(rng));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.bin [heads batch kv_len]\n", argv[0]);
    return 2;
  }
  const int heads = argc > 2 ? std::atoi(argv[2]) : 128, B = argc > 3 ? std::atoi(argv[3]) : 64;
  const int kv_len = argc > 4 ? std::atoi(argv[4]) : 4096, page = 64, row = 576;
  const int pages_per_seq = (kv_len + page - 1) / page, num_pages = B * pages_per_seq;
  std::mt19937 rng(7);
  std::vector<int32_t> table(num_pages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const size_t rows = size_t(B) * heads;
  auto* q_nope = to_device(uniform(rows * 512, rng));
  auto* q_pe = to_device(uniform(rows * 64, rng));
  auto* cache = to_device(uniform(size_t(num_pages) * page * row, rng));
  auto* lens = to_device(std::vector<int32_t>(B, kv_len));
  auto* d_table = to_device(table);
  __nv_bfloat16* out = nullptr;
  float* lse = nullptr;
  cudaMalloc(&out, rows * 512 * 2);
  cudaMalloc(&lse, rows * 4);
  const size_t trace_words = size_t(2) * 3 * jaxpaged::kMlaTraceEvents;
  uint64_t* trace = nullptr;
  cudaMalloc(&trace, trace_words * 8);

  jaxpaged::MlaDecodeParams p{};
  p.q_nope = q_nope;
  p.q_pe = q_pe;
  p.ckv = cache;
  p.kpe = cache + 512;
  p.kv_lens = lens;
  p.block_tables = d_table;
  p.out = out;
  p.lse = lse;
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
  float* ws = nullptr;
  cudaMalloc(&ws, ws_floats * 4);
  for (int call = 0; call < 3; ++call) {  // the last call's records are kept
    cudaMemset(trace, 0, trace_words * 8);
    p.trace = call == 2 ? trace : nullptr;
    auto err = jaxpaged::run_mla_decode_gpu(p, jaxpaged::ffi::DataType::BF16, ws, ws_floats, nullptr);
    const cudaError_t sync = cudaDeviceSynchronize();
    if (!err.success() || sync != cudaSuccess) {
      std::fprintf(stderr, "call %d failed: %s\n", call, err.success() ? cudaGetErrorString(sync) : err.message().c_str());
      return 1;
    }
  }
  std::vector<uint64_t> host(trace_words);
  cudaMemcpy(host.data(), trace, trace_words * 8, cudaMemcpyDeviceToHost);
  FILE* f = std::fopen(argv[1], "wb");
  std::fwrite(host.data(), 8, host.size(), f);
  std::fclose(f);
  std::printf("heads %d batch %d kv_len %d: %zu records written to %s\n", heads, B, kv_len,
              size_t(std::count_if(host.begin(), host.end(), [](uint64_t w) { return w != 0; })), argv[1]);
  return 0;
}
