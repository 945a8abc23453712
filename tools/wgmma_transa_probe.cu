// A standalone probe for the dequantizing loader's O^T (NOTES item 65 f; the plan's step 1,
// bench/logs/2026-11-27_session41_plan_ds_dequant_loader.md): wgmma m64n64k16 bf16 with *both*
// operands in shared memory and A **MN-major** (transposed), the product
//   O^T = V^T P^T   (m64 = 64 latent dims, n64 = 64 query rows, k64 = the tile's 64 tokens)
// read from a bf16 K tile as the loader would store it: rows = tokens, each a 128-byte
// (64-dim) column block, 128-byte swizzle (sw128_offset), so V^T's M dimension is contiguous.
// A's descriptor is compute.cuh's v_desc form (wgmma_desc_sw128(block, 8192, 1024), the
// leading offset unused at m64), moved 2048 bytes (16 tokens) a k16 step; B = P^T K-major
// (rows = query rows, 64 tokens = 128 bytes each, swizzled), moved 32 bytes a step.
// It checks on one warpgroup, for column blocks 0 and 1 of a two-block tile (the second at
// +8192: the plan's `tile + (4 wg + mb) * 8192`), every accumulator against the exact product
// (float64 on the host) with the m64nNk16 f32 accumulator layout (thread t: rows 16 (t / 32) +
// (t % 32) / 4 (+ 8), columns 8 i + 2 (t % 4) (+ 1)). A wrong descriptor or major-ness shows as
// errors of order 1; float32 accumulation of bf16 products leaves ~1e-6 of the largest value.
//
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I src -o /tmp/wgmma_transa_probe \
//     tools/wgmma_transa_probe.cu && /tmp/wgmma_transa_probe
// Written in session 41 (compiled for sm_90a here), not yet run on a GPU. Exit status 0 when
// both blocks are within 1e-5 of the largest |value|.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "common/sm90/wgmma.cuh"

namespace jp = jaxpaged;

constexpr int kTokens = 64, kDims = 64, kRows = 64, kBlocks = 2;
constexpr int kBlockBytes = kTokens * 128;             // one 64-dim column block of the tile
constexpr int kP = kBlocks * kBlockBytes, kSmem = kP + kRows * 128;

// v: [kBlocks][kTokens][kDims] bf16 (block b holds dims 64 b ..), pt: [kRows][kTokens] bf16;
// out: [kBlocks][kDims][kRows] float32 = sum_t v[b][t][d] * pt[r][t].
__global__ void __launch_bounds__(128, 1)
    transa_probe(const __nv_bfloat16* v, const __nv_bfloat16* pt, float* out) {
#if defined(JP_HAVE_WGMMA)
  extern __shared__ __align__(1024) unsigned char sm[];
  const int t = threadIdx.x;
  for (int i = t; i < kBlocks * kTokens * 8; i += 128) {  // V: row = token, chunk = 8 dims
    const int b = i / (kTokens * 8), r = (i / 8) % kTokens, c = i % 8;
    *reinterpret_cast<uint4*>(sm + b * kBlockBytes + jp::sw128_offset(r, c)) =
        *reinterpret_cast<const uint4*>(v + (size_t(b) * kTokens + r) * kDims + 8 * c);
  }
  for (int i = t; i < kRows * 8; i += 128) {  // P^T: row = query row, chunk = 8 tokens
    const int r = i / 8, c = i % 8;
    *reinterpret_cast<uint4*>(sm + kP + jp::sw128_offset(r, c)) = *reinterpret_cast<const uint4*>(pt + r * kTokens + 8 * c);
  }
  jp::fence_proxy_async_shared();
  __syncthreads();
  const uint64_t b_desc = jp::wgmma_desc_sw128(jp::smem_addr(sm + kP), 16, 1024);
  for (int b = 0; b < kBlocks; ++b) {
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
    const uint64_t a_desc = jp::wgmma_desc_sw128(jp::smem_addr(sm + b * kBlockBytes), kBlockBytes, 1024);
    jp::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kTokens / 16; ++k) {
      jp::wgmma_m64n64k16_ss_ta_bf16(d, jp::wgmma_desc_advance(a_desc, 2048 * k), jp::wgmma_desc_advance(b_desc, 32 * k),
                                     k > 0);
    }
    jp::wgmma_commit();
    jp::wgmma_wait<0>();
    const int row = 16 * (t / 32) + (t % 32) / 4, col = 2 * (t % 4);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float* o = out + size_t(b) * kDims * kRows;
      o[row * kRows + 8 * i + col] = d[4 * i];
      o[row * kRows + 8 * i + col + 1] = d[4 * i + 1];
      o[(row + 8) * kRows + 8 * i + col] = d[4 * i + 2];
      o[(row + 8) * kRows + 8 * i + col + 1] = d[4 * i + 3];
    }
  }
#endif
}

int main() {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<__nv_bfloat16> v(size_t(kBlocks) * kTokens * kDims), pt(size_t(kRows) * kTokens);
  for (auto& x : v) x = __float2bfloat16(unit(rng));
  for (auto& x : pt) x = __float2bfloat16(unit(rng));
  __nv_bfloat16 *dv, *dpt;
  float* dout;
  const size_t out_n = size_t(kBlocks) * kDims * kRows;
  cudaMalloc(&dv, v.size() * 2);
  cudaMalloc(&dpt, pt.size() * 2);
  cudaMalloc(&dout, out_n * 4);
  cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dpt, pt.data(), pt.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(dout, 0xff, out_n * 4);  // (NaN: an accumulator never written shows)
  cudaFuncSetAttribute(transa_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem + 1024);
  transa_probe<<<1, 128, kSmem + 1024>>>(dv, dpt, dout);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("kernel failed: %s\n", cudaGetErrorString(err));
    return 2;
  }
  std::vector<float> out(out_n);
  cudaMemcpy(out.data(), dout, out_n * 4, cudaMemcpyDeviceToHost);
  int status = 0;
  for (int b = 0; b < kBlocks; ++b) {
    double worst = 0, largest = 0;
    int wd = -1, wr = -1;
    for (int dim = 0; dim < kDims; ++dim) {
      for (int r = 0; r < kRows; ++r) {
        double ref = 0;
        for (int tok = 0; tok < kTokens; ++tok) {
          ref += double(__bfloat162float(v[(size_t(b) * kTokens + tok) * kDims + dim])) *
                 double(__bfloat162float(pt[size_t(r) * kTokens + tok]));
        }
        const double got = out[(size_t(b) * kDims + dim) * kRows + r];
        const double e = std::isnan(got) ? INFINITY : std::fabs(got - ref);
        largest = std::fmax(largest, std::fabs(ref));
        if (e > worst) worst = e, wd = dim, wr = r;
      }
    }
    const bool ok = worst <= 1e-5 * largest;
    std::printf("block %d: max |error| %.3g of largest %.3g (at dim %d, row %d): %s\n", b, worst, largest, wd, wr,
                ok ? "ok" : "WRONG");
    status |= ok ? 0 : 1;
  }
  return status;
}
