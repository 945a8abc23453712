// The Hopper MLA kernel's timeline (NOTES item 53): runs one dense MLA decode (combined 576-wide
// rows, bf16 or fp8: --cache below; 64-token pages; by default Hq = 128, B = 64, 4096 keys: the bench's
// mla_h128_b64_ctx4k) with the kernels built with JAXPAGED_MLA_TRACE, and writes the records of
// blocks 0 and 1 (src/mla_decode/sm90/trace.cuh: uint64 id << 48 | clock64, per block and role)
// to a file for tools/mla_trace_report.py.
//
//   cmake -S . -B build/trace -G Ninja -DJAXPAGED_CUDA=ON -DJAXPAGED_MLA_TRACE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a
//   ninja -C build/trace jaxpaged_mla_trace
//   build/trace/jaxpaged_mla_trace trace.bin [heads batch kv_len [pool_pages]] [--cache=bf16|fp8|fp8math|656|656f16|656fp8math]
//                                   [--topk=N]
// pool_pages (default: every page its own): the block table names only that many distinct pages
// (e.g. 128 = 9 MB, resident in L2), so the same shape runs with its tiles served from L2.
// --cache (anywhere after trace.bin; default bf16): fp8 = a per-tensor float8_e4m3fn cache in the
// same combined 576-byte rows (the bf16 cache's uniform values quantized at kv_scale 0.02), which the wide fp8 kernel reads
// (sm90/fp8_wide.cuh: more than 16 query rows, unless JAXPAGED_MLA_FP8_WIDE=0; its marks are ids
// 60-95; at most 16 query rows, e.g. heads 16, run the narrow fp8 kernel, sm90/fp8_narrow.cuh,
// marks 100-110 and the loader's 90-95), fp8math = the same with MlaDecodeParams::fp8_math (the wide kernel's kF8 mode), 656 =
// DeepSeek-V3.2's 656-byte rows (the same e4m3 latent, four float32 group scales of 0.02, a bf16
// rope) read with ds_dequant="bfloat16" (the wide kernel's kDs), 656f16 = the same rows read with
// ds_dequant="float16" (its kH instances), 656fp8math = the same rows with fp8_math (its kDF mode;
// marks 83-85 its S^T groups). --topk=N (656-byte rows only; N <= kv_len):
// sparse decode instead, each sequence's list N distinct random slots of its kv_len (the bench's
// sparse configs: kv_len 4096, N 2048), gathered by the loader warpgroup (fp8_ring.cuh's
// mla_ds_gather_ring, marks 90-95 by its thread 0).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "mla_decode/launch.h"
#include "mla_decode/sm90/trace.cuh"
#include "driver_buffers.h"

using jaxpaged_tools::Device;
using jaxpaged_tools::random_bf16;

int main(int argc, char** argv) {
  std::string cache_kind = "bf16";
  int topk = 0;
  {
    int kept = 1;  // (--cache=... taken out; the positional arguments keep their places)
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a.rfind("--cache=", 0) == 0) cache_kind = a.substr(8);
      else if (a.rfind("--topk=", 0) == 0) topk = std::atoi(a.c_str() + 7);
      else argv[kept++] = argv[i];
    }
    argc = kept;
  }
  const bool fp8 = cache_kind == "fp8" || cache_kind == "fp8math", ds = cache_kind == "656" || cache_kind == "656f16" ||
                                                                    cache_kind == "656fp8math";
  const int heads = argc > 2 ? std::atoi(argv[2]) : 128, B = argc > 3 ? std::atoi(argv[3]) : 64;
  const int kv_len = argc > 4 ? std::atoi(argv[4]) : 4096, page = 64, row = ds ? 656 : 576;
  if (argc < 2 || !(fp8 || ds || cache_kind == "bf16") || topk < 0 || (topk > 0 && (!ds || topk > kv_len))) {
    std::fprintf(stderr, "usage: %s OUT.bin [heads batch kv_len [pool_pages]] [--cache=bf16|fp8|fp8math|656|656f16|656fp8math] "
                 "[--topk=N (656-byte rows only, N <= kv_len)]\n", argv[0]);
    return 2;
  }
  const int pages_per_seq = (kv_len + page - 1) / page, num_pages = B * pages_per_seq;
  std::mt19937 rng(7);
  std::vector<int32_t> table(num_pages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const int pool = argc > 5 ? std::max(1, std::min(std::atoi(argv[5]), num_pages)) : num_pages;
  for (int i = 0; i < num_pages; ++i) table[i] %= pool;  // (pages >= pool never read)
  const size_t rows = size_t(B) * heads;
  Device<__nv_bfloat16> q_nope(random_bf16(rows * 512, rng)), q_pe(random_bf16(rows * 64, rng));
  const size_t cache_elems = size_t(num_pages) * page * row;
  Device<__nv_bfloat16> cache(random_bf16(fp8 || ds ? 0 : cache_elems, rng));
  std::vector<uint8_t> bytes(fp8 || ds ? cache_elems : 0);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  for (auto& v : bytes) v = __nv_fp8_e4m3(unit(rng) / 0.02f).__x;  // (the bf16 cache's values, at kv_scale 0.02)
  if (ds) {  // each 656-byte row: its 512 e4m3 bytes as drawn, 4 float32 scales 0.02, a bf16 rope
    for (size_t r = 0; r < cache_elems / row; ++r) {
      uint8_t* at = bytes.data() + r * row;
      const float scale = 0.02f;
      for (int g = 0; g < 4; ++g) std::memcpy(at + 512 + 4 * g, &scale, 4);
      for (int j = 0; j < 64; ++j) {
        const __nv_bfloat16 v = __float2bfloat16(unit(rng));
        std::memcpy(at + 528 + 2 * j, &v, 2);
      }
    }
  }
  Device<uint8_t> cache8(bytes);
  // --topk: each sequence's list, topk distinct positions of its context as pool slots
  std::vector<int32_t> idx(size_t(B) * topk);
  for (int b = 0; b < B && topk > 0; ++b) {
    std::vector<int32_t> pos(kv_len);
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin(), pos.end(), rng);
    for (int j = 0; j < topk; ++j) idx[size_t(b) * topk + j] = table[b * pages_per_seq + pos[j] / page] * page + pos[j] % page;
  }
  Device<int32_t> d_idx(idx);
  Device<int32_t> lens(std::vector<int32_t>(B, kv_len)), d_table(table);
  Device<__nv_bfloat16> out(rows * 512);
  Device<float> lse(rows);
  const size_t trace_words = size_t(2) * 3 * jaxpaged::kMlaTraceEvents;
  Device<uint64_t> trace(trace_words);

  jaxpaged::MlaDecodeParams p{};
  p.q_nope = q_nope.ptr;
  p.q_pe = q_pe.ptr;
  p.ckv = fp8 || ds ? static_cast<const void*>(cache8.ptr) : cache.ptr;
  // (combined rows: strides in elements; 656-byte rows: ckv and kpe the same rows)
  p.kpe = ds ? static_cast<const void*>(cache8.ptr) : (fp8 ? static_cast<const void*>(cache8.ptr + 512) : cache.ptr + 512);
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
  p.kv_scale = fp8 ? 0.02f : 1.f;
  p.q_bf16 = true;
  // (an fp8 latent with its rope fp8 too, right after it: mla_fp8_wide_applies)
  p.fp8 = p.kpe_fp8 = fp8;
  p.kv_e5m2 = false;
  p.fp8_math = cache_kind == "fp8math" || cache_kind == "656fp8math";
  p.ds_rows = ds;
  p.ds_bf16 = cache_kind == "656" || cache_kind == "656fp8math";  // (kDF: any reading)
  p.ds_f16 = cache_kind == "656f16";
  const int64_t ws_floats = jaxpaged::mla_decode_workspace_bytes(
                                topk > 0 ? jaxpaged::mla_sparse_as_lists(p, nullptr, nullptr, topk) : p, -1) / 4;
  Device<float> ws(static_cast<size_t>(ws_floats));
  cudaEvent_t ev[2];
  cudaEventCreate(&ev[0]);
  cudaEventCreate(&ev[1]);
  float last_ms = 0.f;
  for (int call = 0; call < 3; ++call) {  // the last call's records are kept
    cudaMemset(trace.ptr, 0, trace_words * 8);
    p.trace = call == 2 ? trace.ptr : nullptr;
    cudaEventRecord(ev[0]);
    auto err = topk > 0 ? jaxpaged::run_mla_sparse_gpu(p, d_idx.ptr, nullptr, topk, jaxpaged::ffi::DataType::BF16,
                                                       ws.ptr, ws_floats, nullptr)
                        : jaxpaged::run_mla_decode_gpu(p, jaxpaged::ffi::DataType::BF16, ws.ptr, ws_floats, nullptr);
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
  // Which kernel marked: the wide fp8 kernel's ids are 60-82, the narrow one's 100-110 (both with
  // the shared loader's 90-95), the wgmma kernel's 1-54.
  const size_t records = size_t(std::count_if(host.begin(), host.end(), [](uint64_t w) { return w != 0; }));
  auto marked = [&](uint64_t lo, uint64_t hi) {
    return size_t(std::count_if(host.begin(), host.end(), [&](uint64_t w) { return w != 0 && (w >> 48) >= lo && (w >> 48) <= hi; }));
  };
  const size_t wide = marked(60, 82), narrow = marked(100, 110);
  std::printf("cache %s%s, heads %d batch %d kv_len %d pool %d pages: traced call %.1f us; %zu records (%s) in %s\n",
              cache_kind.c_str(), topk > 0 ? (", sparse top-" + std::to_string(topk)).c_str() : "", heads, B, kv_len,
              pool, 1e3 * last_ms, records,
              wide > 0 ? "the wide fp8 kernel's"
                       : (narrow > 0 ? "the narrow fp8 kernel's" : (records > 0 ? "the wgmma kernel's" : "no kernel marked")),
              argv[1]);
  if ((fp8 || ds) && wide == 0 && narrow == 0) {
    std::fprintf(stderr, "%s cache: no marks of the wide kernel (%s)\n", cache_kind.c_str(),
                 ds ? "JAXPAGED_MLA_DS_WIDE=0?"
                    : "JAXPAGED_MLA_FP8_WIDE=0 or JAXPAGED_MLA_FP8_NARROW=0?");
  }
  return 0;
}
