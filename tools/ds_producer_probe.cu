// A standalone probe of NOTES item 50 i's design for 656-byte rows (DeepSeek-V3.2's cache) at 64-128
// heads, before any kernel is built on it: FlashMLA's division of work, where a *producer*
// warpgroup dequantizes each gathered 64-token tile once per 2-block cluster into bf16 tiles in
// shared memory (each block converts 32 of the 64 tokens and writes them into its own and its
// peer's buffer), and the math warpgroups read bf16 tiles only (the 16-bit kernel's products).
// Written in session 29 without a GPU (compiled for sm_90a, not run; a helper's review's fixes in:
// conflict-free store lanes, loads a tile ahead, cluster-scope acquire, the check outside the timing).
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/ds_producer_probe \
//     tools/ds_producer_probe.cu && /tmp/ds_producer_probe
//
// What it runs: 66 clusters of two blocks (the H100's 132 SMs at one block each), 384 threads a
// block: warpgroup 2 the producer, warpgroups 0 and 1 stand-in consumers. Each cluster walks
// `tiles` 64-token tiles of random top-k indices into a pool of 656-byte rows (-1 entries and
// NaN-free random e4m3 bytes, random float32 group scales, random bf16 rope), through a ring of
// two bf16 tile buffers [64 tokens x 576] per block (9 column blocks of 64 rows x 128 bytes,
// 128-byte swizzle: the 16-bit kernel's K-major layout), i.e. 147,456 bytes, as FlashMLA's.
//   producer: per tile, each thread one quarter of one of the block's 32 tokens (latent group q:
//     eight 16-byte loads, its float32 scale; two of the rope's eight 16-byte chunks; a warp takes
//     8 tokens, token-fastest, so its 16-byte stores are free of bank conflicts), plain loads into
//     registers (each tile's loads issued a tile ahead, before the wait for its buffer), value x
//     scale rounded to bf16 (common/fp8.cuh: the documented ds_dequant="bfloat16" reading), 16-byte
//     stores into its own block's buffer and by st.async into the peer's (their bytes complete a
//     transaction on the peer's full barrier);
//   full[s]: 128 local arrivals (after fence.proxy.async: the real consumers read by wgmma) + the
//     peer's 36,864 bytes (expected by thread 0's arrival);
//   consumers: wait full[s] (acquire at cluster scope), spin `work` cycles (a tile's products and softmax, stood in for),
//     meet on their warpgroup's named barrier, and one thread per warpgroup arrives on empty[s] of
//     both blocks (count 4: a buffer is refilled once both blocks' consumers are done with it).
// It reports cycles per tile (clock64 over the whole walk, per block; mean and max) for a few
// consumer work values and with the peer writes off (mode "local": each block converts all 64
// tokens itself - what a kernel without clusters would do), and checks the last tile's buffers of
// every block bit for bit against the host's dequantization.
// Reading the result: FlashMLA runs ~2.84 us a tile (0.091 ms, 32 tiles); our 16-bit kernel's
// products and softmax ~2.3 us (~4000 cycles at 1.755 GHz). If "work 4000" stays near 4000 cycles a
// tile, the producer keeps ahead and the design's bound is the math; if not, its cost shows here.
// Session 47 (NOTES item 72 c): modes "cluster-f16" and "local-f16" convert as ds_dequant="float16"
// reads (f16(value x f16(scale)): one cvt e4m3x2 -> f16x2 and one mul.rn.f16x2 a pair, against the
// bf16 reading's six instructions), the rope as it is; checked bit for bit the same way. They say
// whether a producer of the float16 reading fills a tile faster than session 45's traces' ~2,600
// cycles of SS products and softmax a tile (item 70 c, v1's S^T and O^T of item 66 d) - the
// question the producer design for issue 18 hangs on. Pass "--f16" to run only those two modes.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common/fp8.cuh"
#include "common/sm90/mbarrier.cuh"
#include "sm90_cluster_probe.cuh"

using namespace jaxpaged;
using namespace probe_cluster;

namespace {

constexpr int kTokens = 64, kDims = 576, kRow = 656, kThreads = 384;
constexpr int kBlockBytes = kTokens * 128;            // one 64-dim column block: 64 rows x 128 bytes
constexpr int kTileBytes = 9 * kBlockBytes;           // 73,728
constexpr int kStages = 2;
constexpr int kPeerBytes = 32 * kDims * 2;            // the peer's half of a tile: 36,864
constexpr int kBarAt = kStages * kTileBytes;          // full[2], empty[2]
constexpr int kSmem = kBarAt + 4 * 8 + 1024;          // (+ alignment)

// Byte offset of 16-byte chunk c (dims 8c .. 8c + 7) of token t in a tile buffer.
__host__ __device__ inline uint32_t chunk_at(int t, int c) {
  return uint32_t((c / 8) * kBlockBytes + t * 128 + (((c % 8) ^ (t % 8)) * 16));
}

// Sixteen e4m3 values (one 16-byte chunk) as the float16 reading's f16(value x h) (h: the group's
// scale as an f16 pair): dims 0-7 in lo, 8-15 in hi (common/fp8.cuh's fp8x4_to_half2x2_bits: the
// cvts read each word's halves in place).
__device__ __forceinline__ void fp8x16_f16_scaled(const uint4& in, uint32_t h, uint4& lo, uint4& hi) {
  const uint32_t w[4] = {in.x, in.y, in.z, in.w};
  uint32_t o[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t a, b;
    fp8x4_to_half2x2_bits<false>(w[i], a, b);
    o[2 * i] = f16x2_mul(a, h);
    o[2 * i + 1] = f16x2_mul(b, h);
  }
  lo = make_uint4(o[0], o[1], o[2], o[3]);
  hi = make_uint4(o[4], o[5], o[6], o[7]);
}

// mode 0: clusters (each block converts its 32 tokens, writes both blocks); 1: local (each block
// converts all 64 tokens, writes only its own buffer; the peer's barriers are not touched).
// (a template parameter, so that each mode's registers are its own: local mode holds a third row)
template <int mode, bool kPrefetch, bool kF16 = false>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads, 1)
    probe(const unsigned char* __restrict__ pool, int64_t pool_tokens, const int32_t* __restrict__ idx, int tiles,
          int work, long long* __restrict__ cycles, uint16_t* __restrict__ last) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint64_t* full = reinterpret_cast<uint64_t*>(base + kBarAt);
  uint64_t* empty = full + kStages;
  const int tid = threadIdx.x, wg = tid / 128;
  const uint32_t rank = cta_rank(), peer = rank ^ 1u;
  constexpr bool clustered = mode == 0;
  const int cluster = blockIdx.x / 2;
  const int32_t* list = idx + int64_t(cluster) * tiles * kTokens;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 128);
      mbar_init(&empty[s], clustered ? 4 : 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  cluster_meet();  // (both blocks' barriers exist before either arrives on the other's)
  const uint32_t sbase = uint32_t(__cvta_generic_to_shared(base));
  const uint32_t peer_base = map_to(sbase, peer);
  // The peer's barriers, as shared::cluster addresses (mode 0 only arrives on them).
  // (two scalars and a select: an array indexed by the stage would live in local memory)
  static_assert(kStages == 2, "the selects below");
  const uint32_t peer_full0 = map_to(uint32_t(__cvta_generic_to_shared(&full[0])), peer),
                 peer_full1 = map_to(uint32_t(__cvta_generic_to_shared(&full[1])), peer);
  const uint32_t peer_empty0 = map_to(uint32_t(__cvta_generic_to_shared(&empty[0])), peer),
                 peer_empty1 = map_to(uint32_t(__cvta_generic_to_shared(&empty[1])), peer);
  const long long t0 = clock64();
  long long t1 = t0;
  if (wg == 2) {
    const int pt = tid - 256;
    // Lanes: a warp takes 8 tokens x their 4 latent groups, token-fastest within 8 lanes (each
    // 8-lane phase of a 16-byte store then hits 8 distinct swizzled slots: no bank conflict).
    const int q = (pt / 8) % 4;                      // latent group q, rope chunks 2q and 2q + 1
    const int tk0 = (pt / 32) * 8 + pt % 8;          // this thread's first token of the block's share
    struct Row {
      uint4 raw[8], rope[2];
      float scale;
    };
    // A tile's entry for token tk of this block's share, and the row it names.
    auto entry = [&](int u, int tk) { return list[u * kTokens + (clustered ? int(rank) * 32 + tk : tk)]; };
    auto load = [&](int32_t e, Row& r) {
      const bool ok = e >= 0 && e < pool_tokens;
      const unsigned char* row = pool + (ok ? int64_t(e) * kRow : 0);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        r.raw[i] = ok ? *reinterpret_cast<const uint4*>(row + 128 * q + 16 * i) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < 2; ++i)
        r.rope[i] = ok ? *reinterpret_cast<const uint4*>(row + 528 + 16 * (2 * q + i)) : make_uint4(0, 0, 0, 0);
      r.scale = ok ? *reinterpret_cast<const float*>(row + 512 + 4 * q) : 0.f;
    };
    // The pipeline (v2, session 30; v1 issued tile u + 1's loads only after converting tile u, so
    // each tile waited a whole gather latency): at the top of tile u the thread issues tile u + 1's
    // row loads (their entry read a tile earlier) and tile u + 2's entry, then waits for its buffer
    // and converts tile u's row, loaded a tile ago. Local mode's second token is loaded at the top
    // of its own tile (two rows ahead would not fit the registers).
    // kPrefetch: the rows of tile u + 2 are also asked into L2 at the top of tile u (one bulk
    // prefetch of the whole 656-byte row by the token's first thread), so that the register
    // loads a tile later meet L2's latency rather than DRAM's; entries then run three tiles ahead.
    auto prefetch = [&](int32_t e) {
      if (kPrefetch && q == 0 && e >= 0 && e < pool_tokens)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(pool + int64_t(e) * kRow), "r"(kRow) : "memory");
    };
    Row next;
    int32_t e_next = tiles > 1 ? entry(1, tk0) : -1;
    int32_t e_far = kPrefetch && tiles > 2 ? entry(2, tk0) : -1;
    if (tiles > 0) load(entry(0, tk0), next);
    prefetch(e_next);
    for (int u = 0; u < tiles; ++u) {
      const int s = u % kStages;
      Row cur = next;
      if (u + 1 < tiles) {
        load(e_next, next);
        if constexpr (kPrefetch) {
          prefetch(e_far);
          e_next = e_far;
          e_far = u + 3 < tiles ? entry(u + 3, tk0) : -1;
        } else {
          e_next = u + 2 < tiles ? entry(u + 2, tk0) : -1;
        }
      }
      Row second;
      if constexpr (!clustered) load(entry(u, tk0 + 32), second);
      cluster_wait(smem_addr(&empty[s]), (uint32_t(u / kStages) & 1u) ^ 1u);
      const uint32_t pf = s ? peer_full1 : peer_full0;
      auto put = [&](int tk, const Row& r) {
        const int t = clustered ? int(rank) * 32 + tk : tk;
        const uint32_t h2 = kF16 ? pack2<gpu_half>(r.scale, r.scale) : 0u;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          uint4 lo, hi;
          if constexpr (kF16) fp8x16_f16_scaled(r.raw[i], h2, lo, hi);
          else fp8x16_scaled_to<gpu_bf16>(r.raw[i], r.scale, lo, hi);
          const int c = 16 * q + 2 * i;  // 16-byte output chunks c, c + 1 (dims 128 q + 16 i ..)
          const uint32_t a0 = uint32_t(s) * kTileBytes + chunk_at(t, c), a1 = uint32_t(s) * kTileBytes + chunk_at(t, c + 1);
          *reinterpret_cast<uint4*>(base + a0) = lo;
          *reinterpret_cast<uint4*>(base + a1) = hi;
          if (clustered) {
            st_async16(peer_base + a0, lo, pf);
            st_async16(peer_base + a1, hi, pf);
          }
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int c = 64 + 2 * q + i;
          const uint32_t a = uint32_t(s) * kTileBytes + chunk_at(t, c);
          *reinterpret_cast<uint4*>(base + a) = r.rope[i];
          if (clustered) st_async16(peer_base + a, r.rope[i], pf);
        }
      };
      put(tk0, cur);
      if constexpr (!clustered) put(tk0 + 32, second);
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // (wgmma readers in a kernel)
      if (pt == 0 && clustered) mbar_arrive_expect_tx(&full[s], kPeerBytes);
      else mbar_arrive(&full[s]);
    }
    t1 = clock64();
  } else {
    uint32_t sink = 0;
    for (int u = 0; u < tiles; ++u) {
      const int s = u % kStages;
      cluster_wait(smem_addr(&full[s]), uint32_t(u / kStages) & 1u);
      sink += *reinterpret_cast<const uint32_t*>(base + s * kTileBytes + 16 * (tid % 128));  // (touch the tile)
      const long long w0 = clock64();
      while (clock64() - w0 < work) {
      }
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");
      if (tid % 128 == 0) {
        mbar_arrive(&empty[s]);
        if (clustered) arrive_remote(s ? peer_empty1 : peer_empty0);
      }
    }
    t1 = clock64();
    if (tiles > 0 && wg == 0) {  // the last tile's buffer, for the host's check (outside the timing;
                                 // no later tile refills it)
      const int s = (tiles - 1) % kStages;
      for (int i = tid; i < kTokens * kDims / 8; i += 128) {
        const int t = i / (kDims / 8), c = i % (kDims / 8);
        *reinterpret_cast<uint4*>(last + (int64_t(blockIdx.x) * kTokens + t) * kDims + 8 * c) =
            *reinterpret_cast<const uint4*>(base + s * kTileBytes + chunk_at(t, c));
      }
    }
    if (sink == 0xFFFFFFFFu) cycles[0] = -1;  // (keeps the touch)
  }
  if (tid == 256) cycles[2 * blockIdx.x] = t1 - t0;  // the producer's walk
  if (tid == 0) cycles[2 * blockIdx.x + 1] = t1 - t0;  // the consumers'
  cluster_meet();  // (no block leaves while its peer may still write into it or arrive on it)
}

// Host: e4m3 -> float, float -> bf16 bits (nearest even), the documented reading.
float e4m3_to_float(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  float v = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.f + m / 8.f, e - 7);
  return s ? -v : v;
}
uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// The float16 reading of one latent byte: f16(value x f16(scale)) (the float32 product of an
// e4m3 value and an f16 is exact, so rounding it once gives the device's mul.rn.f16x2).
uint16_t f16_reading_bits(uint8_t b, float sc) {
  const __half_raw hs = __float2half_rn(sc);
  const __half_raw r = __float2half_rn(e4m3_to_float(b) * __half2float(__half(hs)));
  return r.x;
}

}  // namespace

int main(int argc, char** argv) {
  const int clusters = 66, tiles = 32;
  // (the pool: 2^17 rows, 86 MB, is past L2's 50 MB; a small one, e.g. 2^14 rows, runs from L2)
  bool f16_only = false;
  int64_t pool_tokens = 1 << 17;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--f16") == 0) f16_only = true;
    else pool_tokens = std::atoll(argv[i]);
  }
  std::printf("pool of %lld rows (%.1f MB)\n", (long long)pool_tokens, pool_tokens * kRow / 1e6);
  std::mt19937 rng(7);
  std::vector<unsigned char> pool(size_t(pool_tokens) * kRow);
  for (int64_t t = 0; t < pool_tokens; ++t) {
    unsigned char* r = &pool[size_t(t) * kRow];
    for (int i = 0; i < 512; ++i) {
      uint8_t b = uint8_t(rng() & 0xFF);
      if ((b & 0x7F) == 0x7F) b ^= 1;  // (no NaN)
      r[i] = b;
    }
    for (int g = 0; g < 4; ++g) {
      const float sc = std::ldexp(1.f + float(rng() % 1000) / 1000.f, int(rng() % 9) - 12);
      std::memcpy(r + 512 + 4 * g, &sc, 4);
    }
    for (int i = 0; i < 64; ++i) {
      const uint16_t h = bf16_bits(float(int(rng() % 2001) - 1000) / 1000.f);
      std::memcpy(r + 528 + 2 * i, &h, 2);
    }
  }
  std::vector<int32_t> idx(size_t(clusters) * tiles * kTokens);
  for (auto& e : idx) e = (rng() % 50 == 0) ? -1 : int32_t(rng() % pool_tokens);

  unsigned char* d_pool;
  int32_t* d_idx;
  long long* d_cycles;
  uint16_t* d_last;
  CHECK(cudaMalloc(&d_pool, pool.size()));
  CHECK(cudaMalloc(&d_idx, idx.size() * 4));
  CHECK(cudaMalloc(&d_cycles, size_t(2 * clusters) * 2 * 8));
  CHECK(cudaMalloc(&d_last, size_t(2 * clusters) * kTokens * kDims * 2));
  CHECK(cudaMemcpy(d_pool, pool.data(), pool.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaFuncSetAttribute(probe<0, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CHECK(cudaFuncSetAttribute(probe<1, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CHECK(cudaFuncSetAttribute(probe<0, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CHECK(cudaFuncSetAttribute(probe<1, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CHECK(cudaFuncSetAttribute(probe<0, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CHECK(cudaFuncSetAttribute(probe<1, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));

  // The expected last tile of cluster k: token t of tile tiles - 1.
  auto expected = [&](int k, int t, int d, bool f16) -> uint16_t {
    const int32_t e = idx[(size_t(k) * tiles + tiles - 1) * kTokens + t];
    if (e < 0 || e >= pool_tokens) return 0;
    const unsigned char* r = &pool[size_t(e) * kRow];
    if (d >= 512) {
      uint16_t h;
      std::memcpy(&h, r + 528 + 2 * (d - 512), 2);
      return h;
    }
    float sc;
    std::memcpy(&sc, r + 512 + 4 * (d / 128), 4);
    return f16 ? f16_reading_bits(r[d], sc) : bf16_bits(e4m3_to_float(r[d]) * sc);
  };

  bool all_ok = true;
  const int works[] = {0, 2000, 2600, 3000, 4000};
  const char* names[] = {"cluster", "local", "cluster+pf", "local+pf", "cluster-f16", "local-f16"};
  for (int mode = f16_only ? 4 : 0; mode < 6; ++mode) {  // (2, 3: modes 0, 1 with the L2 prefetch; 4, 5: the float16 reading)
    const bool f16 = mode >= 4;
    for (int work : works) {
      CHECK(cudaMemset(d_last, 0xFF, size_t(2 * clusters) * kTokens * kDims * 2));
      for (int rep = 0; rep < 2; ++rep) {  // (the first run warms up)
        auto* k = mode == 0   ? probe<0, false>
                  : mode == 1 ? probe<1, false>
                  : mode == 2 ? probe<0, true>
                  : mode == 3 ? probe<1, true>
                  : mode == 4 ? probe<0, false, true>
                              : probe<1, false, true>;
        k<<<2 * clusters, kThreads, kSmem>>>(d_pool, pool_tokens, d_idx, tiles, work, d_cycles, d_last);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
      }
      std::vector<long long> cyc(size_t(2 * clusters) * 2);
      CHECK(cudaMemcpy(cyc.data(), d_cycles, cyc.size() * 8, cudaMemcpyDeviceToHost));
      double sum = 0, mx = 0;
      for (int b = 0; b < 2 * clusters; ++b) {
        const double c = double(std::max(cyc[2 * b], cyc[2 * b + 1])) / tiles;
        sum += c;
        mx = std::max(mx, c);
      }
      std::vector<uint16_t> got(size_t(2 * clusters) * kTokens * kDims);
      CHECK(cudaMemcpy(got.data(), d_last, got.size() * 2, cudaMemcpyDeviceToHost));
      long bad = 0;
      for (int b = 0; b < 2 * clusters; ++b)
        for (int t = 0; t < kTokens; ++t)
          for (int d = 0; d < kDims; ++d)
            bad += got[(size_t(b) * kTokens + t) * kDims + d] != expected(b / 2, t, d, f16);
      all_ok &= bad == 0;
      std::printf("mode %-11s work %5d: %7.0f cycles a tile (mean over blocks), %7.0f max; last tiles %s (%ld bad)\n",
                  names[mode], work, sum / (2 * clusters), mx, bad == 0 ? "exact" : "WRONG", bad);
    }
  }
  std::printf("%s\n", all_ok ? "PASS" : "FAIL");
  return all_ok ? 0 : 1;
}
