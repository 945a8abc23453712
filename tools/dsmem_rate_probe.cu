// A standalone probe for NOTES item 72's next-session idea (issue 18: O^T's columns split across a
// 2-CTA cluster at 128 heads, each CTA sending its P^T, 8 KiB a tile, to the peer): how fast two
// blocks of a cluster exchange 4-16 KiB through distributed shared memory, both directions at once,
// by each of three means:
//   st.async:  the 128 threads of a warpgroup store 16 bytes at a time from registers into the
//              peer's buffer (st.async ... mbarrier::complete_tx, as tools/ds_producer_probe.cu's
//              cluster mode - whose ~36 KiB a tile bound it at ~4,400 cycles, item 72 c);
//   bulk x1:   one thread copies the whole local buffer to the peer with one bulk copy
//              (cp.async.bulk.shared::cluster.shared::cta ... complete_tx);
//   bulk x4:   four threads, a quarter each.
// The bulk modes first write the local buffer with plain stores (as a kernel writes its P^T for its
// own products anyway) when "write" is on. A ring of stages a direction: the sender waits for
// the peer's remote arrival that it has read the stage (count 1),
// the receiver's thread 0 posts the expected bytes, all its threads wait for them (acquire at
// cluster scope), read a word each, meet, and thread 0 arrives on the peer's empty barrier. Rings
// of two stages (one transfer in flight beside the one received: a double-buffered kernel's rate,
// round-trip latency included) and of four (nearer the link's own bandwidth).
// 66 clusters x 2 blocks (one block an SM: 200 KiB of shared memory asked), `iters` transfers a
// direction; cycles per transfer = clock64 over the walk / iters (mean and max over blocks);
// bytes a cycle a direction = bytes / that (the fastest of two timed runs after a warm-up). A
// separate run of 8 transfers per setting checks every word (the timed runs check one word a
// thread a transfer); the receive buffers are poisoned first, so a transfer that never landed shows.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/dsmem_rate_probe \
//     tools/dsmem_rate_probe.cu && /tmp/dsmem_rate_probe
// Reading (NOTES, session 47's next-session entry): the column split's two 8 KiB exchanges a pair
// stand in the pair's critical path (no shared memory for a reorder that would hide them), so it
// pays only if an 8 KiB transfer takes <= ~500 cycles with its latency (2 stages): >= ~16-30 bytes
// a cycle a direction. A review by a helper (session 47) found no protocol or PTX fault; its
// mends are in (poisoned buffers, errors summed over runs, a cluster barrier before the clocks).
// Written in session 47 without a GPU to run it (compiled for sm_90a here).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/sm90/mbarrier.cuh"
#include "sm90_cluster_probe.cuh"

using namespace jaxpaged;
using namespace probe_cluster;

namespace {

constexpr int kThreads = 128, kMaxStages = 4, kMaxBytes = 16384;
// (laid out for the most stages: src[4], dst[4], then full[4], empty[4])
constexpr int kSrc = 0, kDst = kMaxStages * kMaxBytes, kBar = 2 * kMaxStages * kMaxBytes;
constexpr int kSmem = 200 * 1024;  // (one block an SM)

__device__ inline void expect_bytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ inline void bulk_to_peer(uint32_t remote_dst, uint32_t local_src, uint32_t bytes, uint32_t remote_bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   remote_dst),
               "r"(local_src), "r"(bytes), "r"(remote_bar)
               : "memory");
}
// Word w of transfer u sent by the block of cluster rank `from` (never 0xFFFFFFFF).
__host__ __device__ inline uint32_t pattern(uint32_t from, uint32_t u, uint32_t w) {
  return ((from + 1u) << 28) ^ (u << 13) ^ w;
}

// mode 0: st.async; 1: one bulk copy; 2: four bulk copies. kStages: the ring's stages a direction,
// kStages - 1 transfers in flight beyond the one being received (2 stages: the rate of a kernel
// that double-buffers, latency included; 4: nearer the link's bandwidth). check: every thread
// reads every word it owns (w = tid + 128 i) of each arrived transfer, not one.
template <int kMode, int kStages>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads, 1)
    probe(int bytes, int iters, int write, int check, long long* __restrict__ cycles, int* __restrict__ bad) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int tid = threadIdx.x;
  const uint32_t rank = cta_rank(), peer = rank ^ 1u;
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t full0 = base + kBar, empty0 = base + kBar + 8 * kMaxStages;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(full0 + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(empty0 + 8 * s));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // Poison every receive stage (what an earlier launch left there can equal what is expected:
  // always so in the bulk modes without "write"); the peer writes them only after the meet.
  for (int w = tid; w < kStages * kMaxBytes / 4; w += kThreads)
    reinterpret_cast<uint32_t*>(smem + kDst)[w] = 0xFFFFFFFFu;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // (the bulk copies write them)
  __syncthreads();
  cluster_meet();
  const uint32_t peer_base = map_to(base, peer);
  const uint32_t peer_full0 = map_to(full0, peer), peer_empty0 = map_to(empty0, peer);
  const int words = bytes / 4, chunks = bytes / 16;
  int nbad = 0;

  auto send = [&](int u) {
    const int s = u % kStages;
    cluster_wait(empty0 + 8 * s, (uint32_t(u / kStages) & 1u) ^ 1u);  // the peer has read stage s
    const uint32_t dst = peer_base + kDst + s * kMaxBytes, pfull = peer_full0 + 8 * s;
    if constexpr (kMode == 0) {
      for (int c = tid; c < chunks; c += kThreads) {
        const uint32_t w = 4 * c;
        st_async16(dst + 16 * c,
                   make_uint4(pattern(rank, u, w), pattern(rank, u, w + 1), pattern(rank, u, w + 2), pattern(rank, u, w + 3)),
                   pfull);
      }
    } else {
      const uint32_t src = base + kSrc + s * kMaxBytes;
      if (write) {
        for (int c = tid; c < chunks; c += kThreads) {
          const uint32_t w = 4 * c;
          asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(src + 16 * c), "r"(pattern(rank, u, w)),
                       "r"(pattern(rank, u, w + 1)), "r"(pattern(rank, u, w + 2)), "r"(pattern(rank, u, w + 3))
                       : "memory");
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // (the copy engine reads them)
        asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory");
      }
      constexpr int kCopies = kMode == 1 ? 1 : 4;
      if (tid < kCopies) {
        const uint32_t part = uint32_t(bytes / kCopies);
        bulk_to_peer(dst + tid * part, src + tid * part, part, pfull);
      }
    }
  };
  auto receive = [&](int u) {
    const int s = u % kStages;
    const uint32_t full = full0 + 8 * s;
    if (tid == 0) expect_bytes(full, uint32_t(bytes));
    cluster_wait(full, uint32_t(u / kStages) & 1u);
    const uint32_t* dst = reinterpret_cast<const uint32_t*>(smem + kDst + s * kMaxBytes);
    const uint32_t tag = kMode != 0 && !write ? uint32_t(s) : uint32_t(u);  // (see the fill below)
    if (check) {  // (and poison what was read: a transfer that never lands shows, also without "write")
      uint32_t* d = const_cast<uint32_t*>(dst);
      for (int w = tid; w < words; w += kThreads) nbad += d[w] != pattern(peer, tag, w), d[w] = 0xFFFFFFFFu;
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // (before the next copy into it)
    } else {
      const int w = (tid * 37 + u) % words;
      nbad += dst[w] != pattern(peer, tag, w);
    }
    asm volatile("bar.sync 2, %0;\n" ::"n"(kThreads) : "memory");  // (every thread has read stage s)
    if (tid == 0) arrive_remote(peer_empty0 + 8 * s);
  };

  // The bulk modes' local buffer without "write": each stage filled once, with the pattern of tag
  // s (what the receiver then expects of every transfer through stage s).
  if (kMode != 0 && !write) {
    for (int s = 0; s < kStages; ++s)
      for (int c = tid; c < chunks; c += kThreads)
        for (int e = 0; e < 4; ++e)
          reinterpret_cast<uint32_t*>(smem + kSrc + s * kMaxBytes)[4 * c + e] = pattern(rank, s, 4 * c + e);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
  }
  cluster_meet();  // (both blocks start their clocks together, after any fill)
  const long long t0 = clock64();
  for (int u = 0; u < kStages - 1 && u < iters; ++u) send(u);
  for (int u = 0; u < iters; ++u) {
    if (u + kStages - 1 < iters) send(u + kStages - 1);
    receive(u);
  }
  const long long t1 = clock64();
  if (tid == 0) cycles[blockIdx.x] = t1 - t0;
  atomicAdd(bad, nbad);
  cluster_meet();  // (no block leaves while its peer may still write into it or arrive on it)
}

}  // namespace

int main(int argc, char** argv) {
  const int clusters = 66, iters = argc > 1 ? std::atoi(argv[1]) : 256;
  long long* d_cycles;
  int* d_bad;
  CHECK(cudaMalloc(&d_cycles, 2 * clusters * sizeof(long long)));
  CHECK(cudaMalloc(&d_bad, sizeof(int)));
  using Kernel = void (*)(int, int, int, int, long long*, int*);
  const Kernel kernels[2][3] = {{probe<0, 2>, probe<1, 2>, probe<2, 2>}, {probe<0, 4>, probe<1, 4>, probe<2, 4>}};
  for (auto& row : kernels)
    for (Kernel k : row) CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const char* names[] = {"st.async", "bulk x1", "bulk x4"};
  bool all_ok = true;
  {
    int sms = 0, active = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(2 * clusters);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmem;
    CHECK(cudaOccupancyMaxActiveClusters(&active, kernels[0][0], &cfg));
    std::printf("%d SMs, %d clusters of 2 co-resident at most (%s)\n", sms, active,
                active >= clusters ? "one wave" : "MORE THAN ONE WAVE");
  }
  std::printf("66 clusters x 2 blocks, %d transfers a direction\n", iters);
  for (int stages : {2, 4}) {
  std::printf("%d stages a direction (%d transfers in flight beside the one received)\n", stages, stages - 1);
  for (int mode = 0; mode < 3; ++mode) {
    for (int write = 0; write < (mode == 0 ? 1 : 2); ++write) {
      for (int bytes : {4096, 8192, 16384}) {
        for (int check = 0; check < 2; ++check) {
          const Kernel k = kernels[stages / 4][mode];
          const int n = check ? 8 : iters;
          long long best_mean = -1, best_max = 0;
          int bad = 0;  // (over all reps, the warm-up's too)
          for (int rep = 0; rep < (check ? 1 : 3); ++rep) {  // (the first warms up)
            CHECK(cudaMemset(d_bad, 0, sizeof(int)));
            k<<<2 * clusters, kThreads, kSmem>>>(bytes, n, write, check, d_cycles, d_bad);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            std::vector<long long> cyc(2 * clusters);
            CHECK(cudaMemcpy(cyc.data(), d_cycles, cyc.size() * sizeof(long long), cudaMemcpyDeviceToHost));
            int rep_bad = 0;
            CHECK(cudaMemcpy(&rep_bad, d_bad, sizeof(int), cudaMemcpyDeviceToHost));
            bad += rep_bad;
            long long sum = 0, mx = 0;
            for (long long c : cyc) sum += c, mx = c > mx ? c : mx;
            if ((rep > 0 || check) && (best_mean < 0 || sum / (2 * clusters) < best_mean))
              best_mean = sum / (2 * clusters), best_max = mx;
          }
          all_ok &= bad == 0;
          if (check) {
            std::printf("  %-8s write %d %5d bytes: full check of 8 transfers: %s (%d bad)\n", names[mode], write,
                        bytes, bad == 0 ? "exact" : "WRONG", bad);
          } else {
            const double per = double(best_mean) / n;
            std::printf("%-8s write %d %5d bytes: %7.0f cycles a transfer (mean), %7.0f (max block); %5.1f bytes a "
                        "cycle a direction%s\n",
                        names[mode], write, bytes, per, double(best_max) / n, bytes / per,
                        bad == 0 ? "" : "  SAMPLED WORDS WRONG");
          }
        }
      }
    }
  }
  }
  std::printf("%s\n", all_ok ? "PASS" : "FAIL");
  return all_ok ? 0 : 1;
}
