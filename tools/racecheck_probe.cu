// Does compute-sanitizer racecheck follow barriers between warpgroups? Fifteen tiny kernels, each
// a correct hand-off of shared memory between warps (or warpgroups), run under racecheck; a hazard
// reported for one of them is the tool's, not the code's. The MLA Hopper kernel hands its row
// maxima and sums between warpgroups as probe F does. Findings (H100, compute-sanitizer of CUDA
// 13.0; NOTES items 33 d and 36 c): A-E and H-J are clean every time; F and G (named barriers) are
// flagged every time; K and L (mbarriers) were clean in two runs and L was flagged in a third, as
// were M-O: the reports on producer/consumer hand-offs depend on the run's timing.
//   nvcc -arch=sm_90a -o /tmp/racecheck_probe tools/racecheck_probe.cu
//   compute-sanitizer --tool racecheck /tmp/racecheck_probe [LETTER: that probe alone]
#include <cstdint>
#include <cstdio>

__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }

// A: __syncthreads between warp 0's write and warp 1's read (the control: never a hazard).
__global__ void probe_a(int* out) {
  __shared__ int s[32];
  if (threadIdx.x < 32) s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (threadIdx.x >= 32) out[threadIdx.x - 32] = s[threadIdx.x - 32];
}
// B: bar.sync 1, 64 over the whole 64-thread block.
__global__ void probe_b(int* out) {
  __shared__ int s[32];
  if (threadIdx.x < 32) s[threadIdx.x] = threadIdx.x;
  bar_sync(1, 64);
  if (threadIdx.x >= 32) out[threadIdx.x - 32] = s[threadIdx.x - 32];
}
// C: 96 threads; warp 2 leaves at once; warps 0 and 1 meet on bar.sync 4, 64.
__global__ void probe_c(int* out) {
  __shared__ int s[32];
  if (threadIdx.x >= 64) return;
  if (threadIdx.x < 32) s[threadIdx.x] = threadIdx.x;
  bar_sync(4, 64);
  if (threadIdx.x >= 32) out[threadIdx.x - 32] = s[threadIdx.x - 32];
}
// D: producer/consumer: warp 0 writes and arrives, warp 1 syncs and reads.
__global__ void probe_d(int* out) {
  __shared__ int s[32];
  if (threadIdx.x < 32) {
    s[threadIdx.x] = threadIdx.x;
    bar_arrive(1, 64);
  } else {
    bar_sync(1, 64);
    out[threadIdx.x - 32] = s[threadIdx.x - 32];
  }
}
// E: the MLA epilogue's shape: 384 threads, warpgroup 2 leaves; warpgroups 0 and 1 each write
// their slot, meet on bar.sync 4, 256, read the other's slot; twice, with two full meetings
// between the rounds (as between two sequences).
__global__ void probe_e(float* out) {
  __shared__ float s[512];
  const int wg = threadIdx.x / 128, tw = threadIdx.x % 128;
  if (wg == 2) return;
  float acc = 0.f;
  for (int round = 0; round < 2; ++round) {
    bar_sync(4, 256);
    bar_sync(4, 256);
    s[wg * 256 + 2 * tw] = float(round + tw);
    bar_sync(4, 256);
    acc += s[(1 - wg) * 256 + 2 * tw];
  }
  out[threadIdx.x] = acc;
}

// F: the MLA kernel's whole hand-off protocol without its math: per sequence two meetings on
// barrier 4, then pairs in which warpgroup 0 publishes its maxima (arrive 1), warpgroup 1 reads
// them after sync 1, publishes its own (arrive 2), warpgroup 0 reads those after sync 2 and
// arrives 3, which warpgroup 1 syncs on; then the epilogue's sums over barrier 4. G: the same
// after setmaxnreg (the kernel's register split between the loader and compute warpgroups).
template <bool kSetMaxNReg>
__global__ void __launch_bounds__(384, 1) probe_fg(float* out) {
  __shared__ float s_max[512], s_sum[512];
  const int wg = threadIdx.x / 128, tw = threadIdx.x % 128;
  if (wg == 2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (kSetMaxNReg) asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
#endif
    return;
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kSetMaxNReg) asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
#endif
  float* mine = s_max + wg * 256 + 2 * tw;
  const float* peer = s_max + (1 - wg) * 256 + 2 * tw;
  float acc = 0.f;
  for (int seq = 0; seq < 3; ++seq) {
    bar_sync(4, 256);
    bar_sync(4, 256);
    float m = float(seq);
    for (int pair = 0; pair < 4; ++pair) {
      if (wg == 0) {
        mine[0] = m + pair;
        mine[1] = m - pair;
        bar_arrive(1, 256);
        bar_sync(2, 256);
        acc += peer[0] + peer[1];
        bar_arrive(3, 256);
      } else {
        bar_sync(1, 256);
        const float m0 = peer[0] + peer[1];
        mine[0] = m0;
        mine[1] = -m0;
        bar_arrive(2, 256);
        bar_sync(3, 256);
        acc += m0;
      }
    }
    s_sum[wg * 256 + 2 * tw] = acc;
    bar_sync(4, 256);
    acc += s_sum[(1 - wg) * 256 + 2 * tw];
  }
  out[threadIdx.x] = acc;
}

// H, I, J: probe D's one-way hand-off (write, arrive; sync, read) in other shapes: H 96 threads
// with warp 2 gone (count 64); I 384 threads with warpgroup 2 gone, warpgroup 0 to 1 (count 256);
// J 256 threads, warpgroup 0 to 1 (count 256), nobody gone. (Session 12: racecheck flagged probe
// F, whose every hand-off is this one or E's, while D and E alone were clean.)
__global__ void probe_hij(float* out, int producers) {
  __shared__ float s[512];
  const int t = threadIdx.x;
  const int count = 2 * producers;
  if (t >= count) return;
  if (t < producers) {
    s[t] = float(t);
    bar_arrive(1, count);
  } else {
    bar_sync(1, count);
    out[t] = s[t - producers];
  }
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mb_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mb_arrive(uint64_t* b) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mb_wait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}" ::"r"(
          smem_u32(b)),
      "r"(parity)
      : "memory");
}
// K: probe F's protocol with mbarriers (arrive; try_wait.parity) instead of named barriers: wg 0
// publishes (full0), wg 1 reads and publishes (full1), wg 0 reads and says so (read0); the sums
// meet on a fourth mbarrier, all 256 threads arriving (K: each thread, counts 128 / 256; L: one
// arrival per warp, lane 0 after __syncwarp, counts 4 / 8, as the MLA kernel's empty barriers).
// M, N, O: probe L with one more trait of the MLA kernel each, to find which one racecheck does
// not follow there (session 15: the kernel on L's hand-offs still got hazards, L itself none).
//   M (kVariant 1): warpgroup 2 stays, a producer filling a two-stage ring through full/empty
//     mbarriers (the loader); the compute warpgroups read each stage and release it.
//   N (kVariant 2): setmaxnreg as in the kernel (warpgroup 2 shrinks and leaves).
//   O (kVariant 3): two bar.sync 1, 256 of the compute warpgroups at each sequence's start.
// (kVariant 0: K or L itself)
template <int kVariant, bool kPerWarp = true>
__global__ void __launch_bounds__(384, 1) probe_klmno(float* out) {
  __shared__ float s_max[512], s_sum[512], s_ring[2][256];
  __shared__ __align__(8) uint64_t bars[8];  // as L; then full[2] (1 arrival), empty[2] (8 warps)
  if (threadIdx.x == 0) {
    for (int i = 0; i < 4; ++i) mb_init(&bars[i], (i == 3 ? 8 : 4) * (kPerWarp ? 1 : 32));
    for (int i = 4; i < 6; ++i) mb_init(&bars[i], 4);  // full: the producer's 4 warps
    for (int i = 6; i < 8; ++i) mb_init(&bars[i], 8);  // empty: the consumers' 8 warps
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int wg = threadIdx.x / 128, tw = threadIdx.x % 128, lane = threadIdx.x % 32;
  auto arrive = [&](uint64_t* b) {
    if constexpr (kPerWarp) {
      __syncwarp();
      if (lane == 0) mb_arrive(b);
    } else {
      mb_arrive(b);
    }
  };
  constexpr int kSeqs = 3, kPairs = 4;
  if (wg == 2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (kVariant == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
#endif
    if constexpr (kVariant == 1) {
      for (int k = 0; k < kSeqs * kPairs; ++k) {
        const int st = k % 2;
        mb_wait(&bars[6 + st], ((k / 2) & 1) ^ 1);
        s_ring[st][2 * tw] = float(k);
        s_ring[st][2 * tw + 1] = float(-k);
        arrive(&bars[4 + st]);
      }
    }
    return;
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kVariant == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
#endif
  float* mine = s_max + wg * 256 + 2 * tw;
  const float* peer = s_max + (1 - wg) * 256 + 2 * tw;
  uint32_t parity = 0, sum_parity = 0;
  float acc = 0.f;
  int k = 0;
  for (int seq = 0; seq < kSeqs; ++seq) {
    if constexpr (kVariant == 3) {
      bar_sync(1, 256);
      bar_sync(1, 256);
    }
    float m = float(seq);
    for (int pair = 0; pair < kPairs; ++pair, ++k) {
      if constexpr (kVariant == 1) {
        const int st = k % 2;
        mb_wait(&bars[4 + st], (k / 2) & 1);
        m += s_ring[st][(2 * tw + wg) % 256];
        arrive(&bars[6 + st]);
      }
      if (wg == 0) {
        mine[0] = m + pair;
        mine[1] = m - pair;
        arrive(&bars[0]);
        mb_wait(&bars[1], parity);
        acc += peer[0] + peer[1];
        arrive(&bars[2]);
      } else {
        mb_wait(&bars[0], parity);
        const float m0 = peer[0] + peer[1];
        mine[0] = m0;
        mine[1] = -m0;
        arrive(&bars[1]);
        mb_wait(&bars[2], parity);
        acc += m0;
      }
      parity ^= 1;
    }
    s_sum[wg * 256 + 2 * tw] = acc;
    arrive(&bars[3]);
    mb_wait(&bars[3], sum_parity);
    sum_parity ^= 1;
    acc += s_sum[(1 - wg) * 256 + 2 * tw];
  }
  out[threadIdx.x] = acc;
}

int main(int argc, char** argv) {
  int* out;
  cudaMalloc(&out, 512 * sizeof(int));
  const char* names[] = {"A __syncthreads", "B bar.sync 1,64", "C bar.sync 4,64 (warp 2 exited)",
                         "D bar.arrive/bar.sync", "E MLA epilogue shape", "F MLA hand-off protocol",
                         "G F after setmaxnreg", "H D, 96 threads, warp 2 gone", "I D, 384 threads, warpgroup 2 gone",
                         "J D, 256 threads, warpgroup to warpgroup", "K F with mbarriers",
                         "L K with one arrival per warp", "M L + a producer warpgroup", "N L + setmaxnreg",
                         "O L + bar.sync at sequence starts"};
  // (argv[1]: run only that probe, by letter, so each racecheck report names one)
  for (int k = 0; k < 15; ++k) {
    if (argc > 1 && argv[1][0] != 'A' + k) continue;
    switch (k) {
      case 0: probe_a<<<1, 64>>>(out); break;
      case 1: probe_b<<<1, 64>>>(out); break;
      case 2: probe_c<<<1, 96>>>(out); break;
      case 3: probe_d<<<1, 64>>>(out); break;
      case 4: probe_e<<<1, 384>>>(reinterpret_cast<float*>(out)); break;
      case 5: probe_fg<false><<<1, 384>>>(reinterpret_cast<float*>(out)); break;
      case 6: probe_fg<true><<<1, 384>>>(reinterpret_cast<float*>(out)); break;
      case 7: probe_hij<<<1, 96>>>(reinterpret_cast<float*>(out), 32); break;
      case 8: probe_hij<<<1, 384>>>(reinterpret_cast<float*>(out), 128); break;
      case 9: probe_hij<<<1, 256>>>(reinterpret_cast<float*>(out), 128); break;
      case 10: probe_klmno<0, false><<<1, 384>>>(reinterpret_cast<float*>(out)); break;
      case 11: probe_klmno<0><<<1, 384>>>(reinterpret_cast<float*>(out)); break;
      case 12: probe_klmno<1><<<1, 384>>>(reinterpret_cast<float*>(out)); break;
      case 13: probe_klmno<2><<<1, 384>>>(reinterpret_cast<float*>(out)); break;
      case 14: probe_klmno<3><<<1, 384>>>(reinterpret_cast<float*>(out)); break;
    }
    const cudaError_t e = cudaDeviceSynchronize();
    std::printf("probe %s: %s\n", names[k], cudaGetErrorString(e));
    std::fflush(stdout);
  }
  return 0;
}
