// The GPU kernels without JAX, on adversarial inputs, for compute-sanitizer (memcheck, racecheck,
// initcheck, synccheck). Under JAX, memcheck crashed inside the JAX process after one test; this
// driver calls what the FFI handlers call once a call is decoded (run_paged_attention_gpu,
// run_mla_decode_gpu), with inputs shaped as the Python side passes them: cu_q_lens clamped to
// [0, T] and non-decreasing, page ids and lengths anything.
//
//   cmake -S . -B build/sanitize -G Ninja -DJAXPAGED_SANITIZE_DRIVER=ON -DJAXPAGED_CUDA_ARCHS=90a
//   ninja -C build/sanitize jaxpaged_sanitize
//   compute-sanitizer --tool memcheck --error-exitcode 9 build/sanitize/jaxpaged_sanitize
//   compute-sanitizer --tool racecheck --error-exitcode 9 build/sanitize/jaxpaged_sanitize --quick
//
// Cases: junk page ids inside and past the used range (INT32_MAX, negative, 2^20), lengths past the
// table and negative, empty sequences, padding rows, decreasing cu_q_lens made flat, every head
// dim, both layouts, page sizes 1, 16 and 256, windows and soft cap, traced options (read from a
// device array), long contexts (KV splits, merges); MLA with 16-128 heads, s_q 1-2, page sizes 1
// and 64, both cache layouts, causal, one 32K-token sequence. Unused cache memory holds NaN.
// Prints one line per case; exits 1 if a launch reports an error.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mla_decode/launch.h"
#include "paged_attention/launch.h"
#include "driver_buffers.h"

namespace {

using jaxpaged::ffi::DataType;
using jaxpaged_tools::Device;
using jaxpaged_tools::random_bf16;

std::mt19937 rng(1234);

int rand_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

const int32_t kJunk[] = {2147483647, -7, 1 << 20};

int failures = 0;

void report(const std::string& name, jaxpaged::ffi::Error err) {
  const cudaError_t sync = cudaDeviceSynchronize();
  const bool ok = err.success() && sync == cudaSuccess;
  std::printf("%-72s %s%s\n", name.c_str(), ok ? "ok" : "FAILED ",
              ok ? "" : (err.failure() ? err.message().c_str() : cudaGetErrorString(sync)));
  failures += !ok;
}

struct PagedCase {
  std::string name;
  std::vector<int> q_lens;   // per sequence; empty: pure decode (one row each)
  std::vector<int> kv_lens;  // may be negative or past the table
  int hq, hkv, dim, page;
  bool hnd = false;
  int window = 0;
  float soft_cap = 0.f;
  bool traced = false;   // options read from a device array
  int junk_used = 0;     // junk ids placed inside the used range
  int pad_rows = 0;      // rows of q past cu[S]
  bool decreasing = false;  // raw cu_q_lens decrease somewhere (flattened as the op does)
  int fp8 = 0;              // caches: 0 bf16, 1 float8_e4m3fn, 2 float8_e5m2 (random bytes, NaN included)
};

void run_paged(const PagedCase& c) {
  const bool decode = c.q_lens.empty();
  const int S = int(c.kv_lens.size());
  std::vector<int> cu(S + 1, 0);
  for (int s = 0; s < S; ++s) cu[s + 1] = cu[s] + (decode ? 1 : c.q_lens[s]);
  const int T = cu[S] + (decode ? 0 : c.pad_rows);
  if (c.decreasing && S >= 3) {  // raw [.., big, small, ..]: clamp + running max makes it flat
    cu[2] = std::max(cu[1], cu[2] - 3);
    for (int s = 1; s <= S; ++s) cu[s] = std::max(cu[s], cu[s - 1]);
  }
  int max_pages = 1;
  for (int L : c.kv_lens) max_pages = std::max(max_pages, (std::max(L, 0) + c.page - 1) / c.page);
  max_pages = std::min(max_pages, 4096);
  const int used = S * max_pages, num_pages = used + 2;
  std::vector<int32_t> pages(num_pages);
  for (int i = 0; i < num_pages; ++i) pages[i] = i;
  std::shuffle(pages.begin(), pages.end(), rng);
  std::vector<int32_t> table(size_t(S) * (max_pages + 1));
  const int width = max_pages + 1;  // one spare (junk) entry per row
  for (int s = 0; s < S; ++s) {
    for (int j = 0; j < width; ++j) table[s * width + j] = j < max_pages ? pages[s * max_pages + j] : kJunk[s % 3];
  }
  for (int i = 0; i < c.junk_used; ++i) table[rand_int(0, S - 1) * width + rand_int(0, max_pages - 1)] = kJunk[i % 3];
  const bool pool_poison = true;
  const size_t page_elems = size_t(c.page) * c.hkv * c.dim;
  // Pages 0 and 1 of the shuffled pool are never in a table: poison them.
  const int spare0 = pages[used], spare1 = pages[used + 1];
  auto poisoned = [&](size_t i) {
    const int64_t pg = int64_t(i / page_elems);
    return pool_poison && (pg == spare0 || pg == spare1);
  };
  Device<__nv_bfloat16> q(random_bf16(size_t(T) * c.hq * c.dim, rng));
  Device<__nv_bfloat16> k(random_bf16(num_pages * page_elems, rng, poisoned)), v(random_bf16(num_pages * page_elems, rng, poisoned));
  std::vector<uint8_t> bytes(c.fp8 ? num_pages * page_elems : 0);
  for (auto& b : bytes) b = uint8_t(rand_int(0, 255));
  Device<uint8_t> k8(bytes), v8(bytes);
  std::vector<int32_t> lens(c.kv_lens.begin(), c.kv_lens.end());
  Device<int32_t> d_lens(lens), d_table(table), d_cu(std::vector<int32_t>(cu.begin(), cu.end()));
  Device<__nv_bfloat16> out(size_t(T) * c.hq * c.dim);
  Device<float> lse(size_t(T) * c.hq);

  jaxpaged::PagedAttentionParams p{};
  p.q = q.ptr;
  p.k_cache = c.fp8 ? static_cast<const void*>(k8.ptr) : k.ptr;
  p.v_cache = c.fp8 ? static_cast<const void*>(v8.ptr) : v.ptr;
  p.kv_e5m2 = c.fp8 == 2;
  p.kv_lens = d_lens.ptr;
  p.block_tables = d_table.ptr;
  p.cu_q_lens = d_cu.ptr;
  p.out = out.ptr;
  p.lse = lse.ptr;
  p.num_tokens = T;
  p.num_q_heads = c.hq;
  p.num_kv_heads = c.hkv;
  p.head_dim = c.dim;
  p.num_seqs = S;
  p.max_pages = width;
  p.num_pages = num_pages;
  p.page_size = c.page;
  p.head_stride = c.hnd ? int64_t(c.page) * c.dim : c.dim;
  p.slot_stride = c.hnd ? c.dim : int64_t(c.hkv) * c.dim;
  p.page_stride = page_elems;
  p.scale = 1.f / std::sqrt(float(c.dim));
  p.soft_cap = c.soft_cap;
  p.sliding_window = c.window;
  p.k_scale = c.fp8 ? 0.05f : 1.f;
  p.v_scale = c.fp8 ? 0.02f : 1.f;
  p.decode_only = decode;
  std::vector<int32_t> words(jaxpaged::PagedOptions::kWords);
  std::memcpy(&words[0], &p.scale, 4);
  std::memcpy(&words[1], &p.soft_cap, 4);
  words[2] = c.window;
  std::memcpy(&words[3], &p.k_scale, 4);
  std::memcpy(&words[4], &p.v_scale, 4);
  Device<int32_t> d_options(words);
  p.options = c.traced ? d_options.ptr : nullptr;
  const int64_t ws_floats = jaxpaged::PagedWorkspace::of(p).floats;
  Device<float> ws{static_cast<size_t>(ws_floats)};
  report("paged " + c.name, jaxpaged::run_paged_attention_gpu(p, DataType::BF16, c.fp8 != 0, ws.ptr, ws_floats, nullptr));
  // The same call with a plan (jaxpaged.paged_attention_plan): the same bytes out. Then with a plan
  // of junk words (a plan is caller data): rows may be left unwritten, but no access out of bounds.
  const size_t out_bytes = size_t(T) * c.hq * c.dim * sizeof(__nv_bfloat16), lse_bytes = size_t(T) * c.hq * 4;
  std::vector<unsigned char> first(out_bytes + lse_bytes), again(out_bytes + lse_bytes);
  cudaMemcpy(first.data(), out.ptr, out_bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(first.data() + out_bytes, lse.ptr, lse_bytes, cudaMemcpyDeviceToHost);
  const int64_t group = c.hq / c.hkv, plan_ints = jaxpaged::paged_plan_ints(T, group, S);
  Device<int32_t> plan{static_cast<size_t>(plan_ints)};
  report("paged plan " + c.name, jaxpaged::run_paged_plan_gpu(d_lens.ptr, d_cu.ptr, S, T, group,
                                                              int64_t(width) * c.page, decode, plan.ptr, nullptr));
  report("paged with plan " + c.name, jaxpaged::run_paged_attention_gpu(p, DataType::BF16, c.fp8 != 0, ws.ptr,
                                                                        ws_floats, nullptr, plan.ptr));
  cudaMemcpy(again.data(), out.ptr, out_bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(again.data() + out_bytes, lse.ptr, lse_bytes, cudaMemcpyDeviceToHost);
  if (first != again) {
    std::printf("%-72s FAILED output differs from the call without the plan\n", ("paged with plan " + c.name).c_str());
    ++failures;
  }
  std::vector<int32_t> junk(static_cast<size_t>(plan_ints));
  for (auto& v : junk) {
    const int r = rand_int(0, 9);
    v = r < 2 ? -rand_int(1, 1 << 20) : (r < 4 ? (1 << 30) | rand_int(0, 1 << 20) : (r < 6 ? 2147483647 : rand_int(0, 40)));
  }
  Device<int32_t> junk_plan(junk);
  report("paged with a junk plan " + c.name, jaxpaged::run_paged_attention_gpu(p, DataType::BF16, c.fp8 != 0, ws.ptr,
                                                                               ws_floats, nullptr, junk_plan.ptr));
}

struct MlaCase {
  std::string name;
  std::vector<int> kv_lens;
  int s_q, heads, page;
  bool combined = true, causal = false;
  int junk_used = 0;
  int sparse_topk = 0;  // > 0: also sparse MLA decode over random index lists of this length
  int fmt = 0;  // the cache: 0 bf16, 1 fp8 e4m3 (combined, or latent + bf16 rope), 2 656-byte rows, 3 those
                // read with bf16 dequantization (ds_bf16: the wgmma kernel on Hopper), 4 with f16
                // dequantization (ds_f16: the wide kernel where it applies, else the portable one)
};

void run_mla(const MlaCase& c) {
  const int B = int(c.kv_lens.size());
  int max_pages = 1;
  for (int L : c.kv_lens) max_pages = std::max(max_pages, (std::max(L, 0) + c.page - 1) / c.page);
  max_pages = std::min(max_pages, 4096);  // a length past the table then clamps to 4096 pages
  const int width = max_pages + 1, used = B * max_pages, num_pages = used + 2;
  std::vector<int32_t> pages(num_pages);
  for (int i = 0; i < num_pages; ++i) pages[i] = i;
  std::shuffle(pages.begin(), pages.end(), rng);
  std::vector<int32_t> table(size_t(B) * width);
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < width; ++j) table[b * width + j] = j < max_pages ? pages[b * max_pages + j] : kJunk[b % 3];
  }
  for (int i = 0; i < c.junk_used; ++i) table[rand_int(0, B - 1) * width + rand_int(0, max_pages - 1)] = kJunk[i % 3];
  // (quantized caches: random bytes, fp8 NaNs and wild 656-byte row scales included)
  const int row = c.fmt >= 2 ? 656 : (c.combined ? 576 : 512);
  const size_t page_rows = size_t(c.page);
  const int spare0 = pages[used], spare1 = pages[used + 1];
  auto poisoned = [&](size_t i, int w) {
    const int64_t pg = int64_t(i / (page_rows * w));
    return pg == spare0 || pg == spare1;
  };
  const size_t rows = size_t(B) * c.s_q * c.heads;
  Device<__nv_bfloat16> q_nope(random_bf16(rows * 512, rng));
  Device<__nv_bfloat16> q_pe(random_bf16(rows * 64, rng));
  Device<__nv_bfloat16> ckv(random_bf16(c.fmt ? 0 : num_pages * page_rows * row, rng, [&](size_t i) { return poisoned(i, row); }));
  std::vector<uint8_t> bytes(c.fmt ? num_pages * page_rows * row : 0);
  for (auto& v : bytes) v = uint8_t(rand_int(0, 255));
  Device<uint8_t> ckv8(bytes);
  const void* cache = c.fmt ? static_cast<const void*>(ckv8.ptr) : ckv.ptr;
  const size_t elem = c.fmt ? 1 : 2;
  Device<__nv_bfloat16> kpe(random_bf16(c.combined ? 0 : num_pages * page_rows * 64, rng, [&](size_t i) { return poisoned(i, 64); }));
  Device<int32_t> d_lens(std::vector<int32_t>(c.kv_lens.begin(), c.kv_lens.end())), d_table(table);
  Device<__nv_bfloat16> out(rows * 512);
  Device<float> lse(rows);

  jaxpaged::MlaDecodeParams p{};
  p.q_nope = q_nope.ptr;
  p.q_pe = q_pe.ptr;
  p.ckv = cache;
  p.kpe = c.fmt >= 2 ? cache : (c.combined ? static_cast<const char*>(cache) + 512 * elem : static_cast<const void*>(kpe.ptr));
  p.kv_lens = d_lens.ptr;
  p.block_tables = d_table.ptr;
  p.out = out.ptr;
  p.lse = lse.ptr;
  p.batch = B;
  p.s_q = c.s_q;
  p.num_heads = c.heads;
  p.max_pages = width;
  p.num_pages = num_pages;
  p.page_size = c.page;
  p.ckv_slot_stride = row;
  p.ckv_page_stride = int64_t(c.page) * row;
  p.kpe_slot_stride = c.combined ? row : 64;
  p.kpe_page_stride = c.combined ? int64_t(c.page) * row : int64_t(c.page) * 64;
  p.scale = 1.f / std::sqrt(192.f);
  p.kv_scale = 0.03f;
  p.causal = c.causal;
  p.ds_rows = c.fmt >= 2;
  p.ds_bf16 = c.fmt == 3;
  p.ds_f16 = c.fmt == 4;
  p.fp8 = c.fmt == 1;
  p.kpe_fp8 = c.fmt == 1 && c.combined;
  p.q_bf16 = true;
  const int64_t ws_floats = jaxpaged::mla_decode_workspace_bytes(p, -1) / 4;  // -1: the most any visible GPU needs
  Device<float> ws{static_cast<size_t>(ws_floats)};
  report("mla " + c.name, jaxpaged::run_mla_decode_gpu(p, DataType::BF16, ws.ptr, ws_floats, nullptr));
  {
    // The same call with a plan (jaxpaged.mla_decode_plan): the same bytes out. Then with a plan of
    // junk words (a plan is caller data): any numbers, but no access out of bounds.
    const size_t out_bytes = rows * 512 * sizeof(__nv_bfloat16);
    std::vector<unsigned char> first(out_bytes), again(out_bytes);
    cudaMemcpy(first.data(), out.ptr, out_bytes, cudaMemcpyDeviceToHost);
    Device<int32_t> plan{static_cast<size_t>(jaxpaged::mla_plan_ints(B))};
    report("mla plan " + c.name, jaxpaged::run_mla_plan_gpu(d_lens.ptr, B, int64_t(c.s_q) * c.heads,
                                                            int64_t(width) * c.page, plan.ptr, nullptr));
    report("mla with plan " + c.name, jaxpaged::run_mla_decode_gpu(p, DataType::BF16, ws.ptr, ws_floats, nullptr,
                                                                   plan.ptr));
    cudaMemcpy(again.data(), out.ptr, out_bytes, cudaMemcpyDeviceToHost);
    if (first != again) {
      std::printf("%-72s FAILED output differs from the call without the plan\n", ("mla with plan " + c.name).c_str());
      ++failures;
    }
    std::vector<int32_t> junk(static_cast<size_t>(jaxpaged::mla_plan_ints(B)));
    for (auto& v : junk) v = rand_int(0, 9) < 2 ? -rand_int(1, 1 << 20) : rand_int(0, 300);
    Device<int32_t> junk_plan(junk);
    report("mla with a junk plan " + c.name,
           jaxpaged::run_mla_decode_gpu(p, DataType::BF16, ws.ptr, ws_floats, nullptr, junk_plan.ptr));
  }
  if (p.fp8 && p.kpe_fp8) {  // combined fp8: again with fp8_math (the wide kernel's fp8 mode where it runs)
    p.fp8_math = true;
    report("mla fp8_math " + c.name, jaxpaged::run_mla_decode_gpu(p, DataType::BF16, ws.ptr, ws_floats, nullptr));
    p.fp8_math = false;
  }
  if (c.sparse_topk > 0) {
    // Index lists mixing pool slots (duplicates likely), -1, the pool's end and the int32 extremes;
    // topk_lens negative, within and past topk.
    const int64_t pool = int64_t(num_pages) * c.page;
    const int32_t junk[] = {-1, int32_t(pool), 2147483647, -2147483647 - 1};
    std::vector<int32_t> idx(size_t(B) * c.s_q * c.sparse_topk);
    for (auto& v : idx) v = rand_int(0, 9) < 2 ? junk[rand_int(0, 3)] : rand_int(0, int(pool - 1));
    std::vector<int32_t> topk_lens(B);
    for (auto& n : topk_lens) n = rand_int(-3, c.sparse_topk + 5);
    Device<int32_t> d_idx(idx), d_topk_lens(topk_lens);
    const int64_t sparse_ws = jaxpaged::mla_decode_workspace_bytes(
                                  jaxpaged::mla_sparse_as_lists(p, nullptr, nullptr, c.sparse_topk), -1) / 4;
    Device<float> ws_sparse{static_cast<size_t>(sparse_ws > 0 ? sparse_ws : 1)};
    report("mla sparse " + c.name, jaxpaged::run_mla_sparse_gpu(p, d_idx.ptr, d_topk_lens.ptr, c.sparse_topk,
                                                                DataType::BF16, ws_sparse.ptr, sparse_ws, nullptr));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // --quick: fewer, smaller cases (racecheck is slow); --mla-only: skip the paged cases;
  // --paged-only: skip the MLA cases; --only=TEXT (repeatable): only the cases whose names
  // contain one of the TEXTs.
  bool quick = false, mla_only = false, paged_only = false;
  std::vector<std::string> only;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    quick |= arg == "--quick";
    mla_only |= arg == "--mla-only";
    paged_only |= arg == "--paged-only";
    if (arg.rfind("--only=", 0) == 0) only.push_back(arg.substr(7));
  }
  auto chosen = [&](const std::string& name) {
    if (only.empty()) return true;
    for (const auto& t : only) {
      if (name.find(t) != std::string::npos) return true;
    }
    return false;
  };
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // each case's line as it finishes (a tool may be cut off)
  std::vector<PagedCase> paged = {
      {"decode GQA 4, junk ids in range, lengths past table / negative", {}, {37, 5000, -3, 0, 700, 16}, 32, 8, 128, 16,
       false, 0, 0.f, false, 3},
      {"decode MHA d64 page 1", {}, {1, 9, 33, 0}, 8, 8, 64, 1},
      {"decode d256 soft cap traced", {}, {300, 2000, 17}, 16, 2, 256, 16, false, 0, 50.f, true, 1},
      {"decode long context (splits), HND", {}, {32768, 100}, 32, 8, 128, 16, true},
      {"ragged mix, padding rows, window", {1, 40, 0, 7, 1}, {100, 64, 0, 7, 3000}, 16, 4, 128, 16, false, 24, 0.f,
       false, 2, 5},
      {"ragged, decreasing cu made flat, page 256", {3, 9, 4, 2}, {3, 500, 4, 20000}, 8, 1, 64, 256, false, 0, 0.f,
       false, 0, 3, true},
      {"ragged prefill chunks, d256, traced window", {70, 130}, {90, 140}, 8, 2, 256, 16, false, 33, 0.f, true, 1},
      {"ragged long prefill past table", {64}, {1 << 30}, 4, 4, 128, 16},
      {"fp8 e4m3 decode, junk ids, traced scales", {}, {37, 5000, -3, 0, 700}, 32, 8, 128, 16, false, 0, 0.f, true,
       2, 0, false, 1},
      {"fp8 e5m2 ragged mix, window, d256, HND", {1, 40, 0, 7}, {100, 64, 0, 3000}, 16, 4, 256, 16, true, 24, 0.f,
       false, 1, 3, false, 2},
      {"fp8 e4m3 ragged, d64 page 1", {3, 9, 1}, {3, 500, 4}, 8, 2, 64, 1, false, 0, 30.f, false, 0, 0, false, 1},
      // fp8 decode with head dim 128 (the register path) in pages of 32 and 128 keys, windows starting
      // mid-stage, junk ids (written for session 48's TMA stages, NOTES item 73 b; now the cp.async ones)
      {"fp8 e5m2 decode, HND page 32, window, junk ids", {}, {37, 5000, -3, 0, 700}, 32, 8, 128, 32, true, 77, 0.f,
       false, 2, 0, false, 2},
      {"fp8 e4m3 decode page 128, long (splits), window, soft cap", {}, {20000, 129, 64}, 16, 2, 128, 128, false, 250,
       20.f, false, 1, 0, false, 1},
      // fp8 decode with GQA <= 8 at head dims 64 and 256: the decode-transposed instance (DTR: every
      // tile transposed, no converted buffer)
      {"fp8 e4m3 decode d64 GQA 8, junk ids, window", {}, {37, 5000, -3, 0, 700}, 64, 8, 64, 16, false, 300, 0.f,
       false, 2, 0, false, 1},
      {"fp8 e5m2 decode d256 GQA 4, HND, junk ids, soft cap", {}, {37, 5000, -3, 0, 700}, 16, 4, 256, 16, true, 0, 30.f,
       true, 2, 0, false, 2},
  };
  // Pure decode over several waves of blocks (x 8-32 KV heads): up to 128 sequences (bf16; fp8 256)
  // the blocks find their sequences in the longest-first order themselves (tile_kernel.cuh,
  // seq_in_length_order); past it the tile list again. Lengths varied, negative and zero among
  // them; cases all equal.
  auto lengths = [](int n, bool equal) {
    std::vector<int> v(size_t(n), 77);
    for (int i = 0; !equal && i < n; ++i) v[size_t(i)] = (i * 37) % 200 - 3;
    return v;
  };
  paged.push_back({"decode 120 sequences x 32 KV heads, varied lengths", {}, lengths(120, false), 32, 32, 128, 16,
                   false, 0, 0.f, false, 2});
  paged.push_back({"decode 128 sequences x 32 KV heads, equal lengths", {}, lengths(128, true), 32, 32, 128, 16});
  paged.push_back({"decode 250 sequences, varied lengths (the list)", {}, lengths(250, false), 32, 8, 128, 16, false,
                   0, 0.f, false, 2});
  paged.push_back({"fp8 e4m3 decode 250 sequences, varied lengths", {}, lengths(250, false), 32, 8, 128, 16, false,
                   0, 0.f, false, 0, 0, false, 1});
  paged.push_back({"fp8 e4m3 decode 256 sequences, equal lengths", {}, lengths(256, true), 32, 8, 128, 16, false,
                   0, 0.f, false, 0, 0, false, 1});
  paged.push_back({"fp8 e4m3 decode d64 250 sequences, varied lengths", {}, lengths(250, false), 32, 8, 64, 16, false,
                   0, 0.f, false, 0, 0, false, 1});
  paged.push_back({"decode 400 sequences (the list)", {}, lengths(400, false), 32, 8, 128, 16});
  // 64 sequences x 4 KV heads = 256 blocks of the DTR D = 256 instance: one wave more than half
  // full, which on a device of high bandwidth an SM (an H200) runs in 3 splits for occupancy
  // (kv_splits.h, occupancy_kv_splits); lengths up to 2048, two of them negative, and junk ids.
  std::vector<int> long_lengths(64);
  for (int i = 0; i < 64; ++i) long_lengths[size_t(i)] = (i * 389) % 2100 - 20;
  long_lengths[0] = 2048;
  paged.push_back({"fp8 e4m3 decode d256 64 sequences (occupancy splits), soft cap, junk ids", {}, long_lengths, 16, 4,
                   256, 16, false, 0, 30.f, false, 2, 0, false, 1});
  std::vector<MlaCase> mla = {
      {"h128 b4 page 64 junk ids", {4096, 33, 0, -5}, 1, 128, 64, true, false, 2, 128},
      {"h16 b8 page 1 split cache", {1, 100, 63, 64, 65, 0, 700, 3}, 1, 16, 1, false, false, 0, 64},
      {"h64 s_q 2 causal", {1, 2, 129, 4000}, 2, 64, 64, true, true, 1},
      {"h128 one 32K sequence", {32768}, 1, 128, 64},
      {"h128 lengths past table", {1 << 29, 64}, 1, 128, 64},
      {"fp8 h128 b4 page 64 junk ids", {4096, 33, 0, -5}, 1, 128, 64, true, false, 2, 128, 1},
      {"fp8 latent + bf16 rope h16 page 1", {1, 100, 63, 0, 700}, 1, 16, 1, false, false, 1, 64, 1},
      // (at most 16 query rows, combined fp8 in pages of >= 64: the narrow fp8 kernel on Hopper,
      // unless JAXPAGED_MLA_FP8_NARROW=0: then the wgmma kernel's converting loader)
      {"fp8 h16 page 64 junk ids", {4096, 33, 0, -5, 130}, 1, 16, 64, true, false, 2, 0, 1},
      {"fp8 h8 s_q 2 causal page 128 junk ids", {1, 65, 700, -3}, 2, 8, 128, true, true, 2, 0, 1},
      {"fp8 h1 s_q 16 causal page 64", {3, 64, 700}, 16, 1, 64, true, true, 0, 0, 1},
      // (more query rows, combined fp8 in pages of >= 64: the wide fp8 kernel on Hopper, unless
      // JAXPAGED_MLA_FP8_WIDE=0)
      {"fp8 h64 s_q 2 causal page 64 junk ids", {1, 2, 129, 4000, -1}, 2, 64, 64, true, true, 2, 0, 1},
      {"fp8 h32 page 128 one 32K sequence", {32768}, 1, 32, 128, true, false, 0, 0, 1},
      {"656-byte rows h64 s_q 2 causal junk ids", {1, 2, 129, 4000, -1}, 2, 64, 64, true, true, 2, 256, 2},
      // (656-byte rows read with bf16 dequantization, 128 query rows, pages of 64: the wide kernel on
      // Hopper, dense and over the sparse lists, unless JAXPAGED_MLA_DS_WIDE=0)
      {"656-byte rows bf16 dequant h128 junk ids", {4096, 33, 0, -5}, 1, 128, 64, true, false, 2, 128, 3},
      // (and at 16 or fewer query rows since session 29: a quarter of the block's rows live; the
      // page-1 cache's dense call takes the wgmma kernel, its sparse lists the wide one)
      {"656-byte rows bf16 dequant h16 junk ids", {4096, 33, 0, -5, 130}, 1, 16, 64, true, false, 2, 128, 3},
      {"656-byte rows bf16 dequant h8 s_q 2 page 1 junk ids", {1, 65, 700, -3}, 2, 8, 1, true, false, 2, 64, 3},
      {"656-byte rows bf16 dequant h8 s_q 2 causal page 64 junk ids", {1, 65, 700, -3, 130}, 2, 8, 64, true, true, 2, 0, 3},
      // (656-byte rows read with f16 dequantization: the wide kernel's kH instances, dense and over
      // the sparse lists; pages of 16: the portable kernel)
      {"656-byte rows f16 dequant h128 junk ids", {4096, 33, 0, -5}, 1, 128, 64, true, false, 2, 128, 4},
      {"656-byte rows f16 dequant h8 s_q 2 causal page 64 junk ids", {1, 65, 700, -3, 130}, 2, 8, 64, true, true, 2, 64, 4},
      {"656-byte rows f16 dequant h16 page 16", {1, 65, 300}, 1, 16, 16, true, false, 0, 0, 4},
  };
  int device = 0, count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA device\n");
    return 2;
  }
  cudaGetDevice(&device);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  std::printf("device %s (sm_%d%d)%s\n", prop.name, prop.major, prop.minor, quick ? ", quick" : "");
  for (size_t i = 0; i < paged.size(); ++i) {
    if (mla_only || (quick && (i == 3 || i == 7)) || !chosen(paged[i].name)) continue;
    run_paged(paged[i]);
  }
  for (size_t i = 0; i < mla.size(); ++i) {
    if (paged_only || (quick && (i == 3 || i == 4)) || !chosen(mla[i].name)) continue;
    run_mla(mla[i]);
  }
  std::printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
