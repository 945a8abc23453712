// What the standalone Hopper cluster probes share (tools/ds_producer_probe.cu,
// tools/dsmem_rate_probe.cu): a host check that exits on a CUDA error, and the 2-block cluster's
// device primitives - this block's rank, a peer's shared::cluster address, the cluster barrier,
// a wait whose acquire covers the cluster, a remote arrival, a 16-byte st.async. Probe code only:
// the package's kernels use no clusters.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

namespace probe_cluster {

__device__ inline uint32_t cta_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// The shared::cluster address of `local` (a shared::cta address) in block `rank` of the cluster.
__device__ inline uint32_t map_to(uint32_t local, uint32_t rank) {
  uint32_t a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(a) : "r"(local), "r"(rank));
  return a;
}
__device__ inline void cluster_meet() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// A wait on this block's mbarrier at shared::cta address `bar` whose acquire covers the cluster:
// its phases complete by a peer's st.async or bulk-copy bytes and remote arrivals (release at
// cluster scope).
__device__ inline void cluster_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      " .reg .pred done;\n"
      "wait_%=:\n"
      " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ inline void arrive_remote(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote_bar) : "memory");
}
// 16 bytes into a peer's shared memory, completing that many bytes of the peer's mbarrier.
__device__ inline void st_async16(uint32_t remote, uint4 v, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                   remote),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(remote_bar)
               : "memory");
}

}  // namespace probe_cluster
