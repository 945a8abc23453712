// Hopper (sm_90a) warpgroup tensor-core products: shared-memory matrix descriptors, the wgmma
// fences, and the product shapes the MLA kernel uses (spelled out in wgmma_ops.inc).
//
// Shared-memory operands use the 128-byte swizzle: a matrix is stored as column blocks of 64
// 16-bit elements (128 bytes per row), rows consecutive, and within each 8-row x 128-byte atom
// (1024 bytes, 1024-aligned) the 16-byte chunk c of row r sits at position c ^ (r % 8). The same
// bytes serve as a K-major operand (rows = M or N, columns = K: Q and K for S = Q K^T) and as an
// MN-major one (rows = K, columns = N: V for O = P V), which is how one K/V tile feeds both products.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/sm80/mma.cuh"  // ldmatrix_x4, ldmatrix_x4_trans
#include "gpu_vendor.h"

namespace jaxpaged {

// Matrix descriptor (PTX ISA "matrix-descriptor-format"): start address, leading- and
// stride-dimension byte offsets (all >> 4), swizzle mode 1 = 128 bytes in bits 62-63.
// K-major, 128B swizzle: the stride offset steps 8 rows (1024 bytes); the leading one is unused.
// MN-major, 128B swizzle: the leading offset steps 64 columns (one column block), the stride one
// steps 8 rows of K (1024 bytes).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_byte_addr, uint32_t leading_bytes,
                                                     uint32_t stride_bytes) {
  uint64_t d = 0;
  d |= uint64_t((smem_byte_addr & 0x3FFFF) >> 4);
  d |= uint64_t((leading_bytes >> 4) & 0x3FFF) << 16;
  d |= uint64_t((stride_bytes >> 4) & 0x3FFF) << 32;
  d |= uint64_t(1) << 62;
  return d;
}

// The same with the 64-byte swizzle (mode 2): K-major rows of 64 bytes, 8-row atoms of 512 bytes
// (512-aligned) in which 16-byte chunk c of row r sits at c ^ ((r / 2) % 4); the stride offset steps
// 8 rows (512 bytes). The narrow fp8 MLA kernel's probabilities P'^T (64 tokens of fp8 per row)
// use it.
__device__ __forceinline__ uint64_t wgmma_desc_sw64(uint32_t smem_byte_addr) {
  return (wgmma_desc_sw128(smem_byte_addr, 16, 512) & ~(uint64_t(3) << 62)) | (uint64_t(2) << 62);
}
__host__ __device__ __forceinline__ constexpr int sw64_offset(int row, int chunk) {
  return row * 64 + ((chunk ^ ((row / 2) % 4)) * 16);
}

// Byte offset of the 16-byte chunk `chunk` of row `row` in a 128-byte-swizzled matrix (from its
// 1024-aligned start): rows are 128 bytes, and within each 8-row atom the chunks are XOR-permuted.
__host__ __device__ __forceinline__ constexpr int sw128_offset(int row, int chunk) {
  return row * 128 + ((chunk ^ (row % 8)) * 16);
}

// A descriptor moved by `bytes` (a multiple of 16) within the same swizzled matrix: the start
// address is the low field, so this is one add (no carry: shared addresses are below 256 KiB).
__device__ __forceinline__ uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + uint64_t(bytes >> 4);
}

// Orders this thread's register writes (accumulators, register A operands) before later wgmmas.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes this thread's generic-proxy shared-memory writes (st.shared, cp.async) visible to wgmma,
// which reads shared memory through the async proxy.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving accesses of `x` across an in-flight wgmma that writes it.
__device__ __forceinline__ void reg_fence(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void reg_fence(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }

// Named barriers (0 is __syncthreads): `arrive` signals without waiting, `sync` waits for `count`
// threads in all, so one warpgroup can hand data to another.
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// The same without .aligned (barrier.sync / barrier.arrive): for warps that reach one barrier
// from different code (warp-specialized roles compiled apart), which .aligned does not allow
// (compute-sanitizer's synccheck reports it as divergence).
__device__ __forceinline__ void named_barrier_sync_any(int id, int count) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive_any(int id, int count) {
  asm volatile("barrier.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define JP_HAVE_WGMMA 1
#include "common/sm90/wgmma_ops.inc"
JP_WGMMA_M64N64K16_SS(bf16)
JP_WGMMA_M64N64K16_SS(f16)
JP_WGMMA_M64N256K16_RS_TRANSB(bf16)
JP_WGMMA_M64N256K16_RS_TRANSB(f16)
JP_WGMMA_M64N256K16_SS_TRANSB(bf16)
JP_WGMMA_M64N256K16_SS_TRANSB(f16)

JP_WGMMA_M64N32K32_SS_F8AB(e4m3, e4m3)
JP_WGMMA_M64N32K32_SS_F8AB(e5m2, e4m3)
JP_WGMMA_M64N64K16_RS(f16)
JP_WGMMA_M64N64K16_RS(bf16)  // (tools/wgmma_rega_probe.cu's timing of a bf16 reading of 656-byte rows)
JP_WGMMA_M64N64K32_SS_F8AB(e4m3, e4m3)  // the wide fp8 kernel's fp8-math S^T (A the cache's format)
JP_WGMMA_M64N64K32_SS_F8AB(e5m2, e4m3)
JP_WGMMA_M64N64K32_RS_F8AB(e4m3, e4m3)  // and its O^T (A the cache's bytes, B the e4m3 probabilities)
JP_WGMMA_M64N64K32_RS_F8AB(e5m2, e4m3)
JP_WGMMA_M64N32K32_RS_F8AB(e4m3, e4m3)  // the narrow fp8 kernel's O^T (A its V^T fragments)
JP_WGMMA_M64N32K32_RS_F8AB(e5m2, e4m3)
JP_WGMMA_M64N64K16_SS_TRANSA(bf16)  // (tools/wgmma_transa_probe.cu: V^T from a bf16 tile, NOTES item 65 f)

// (ldmatrix x4 and x4 .trans: common/sm80/mma.cuh's ldmatrix_x4 / ldmatrix_x4_trans.)
// stmatrix x4 .trans (sm_90): four 8 x 8 b16 matrices from registers a..d (one fragment each),
// stored transposed; addr is this lane's row: row lane % 8 of matrix lane / 8. (Its plain form
// served the narrow fp8 kernel's V^T transposer until session 54.)
__device__ __forceinline__ void stsm_x4_trans(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b),
               "r"(c), "r"(d)
               : "memory");
}

// m64n32k32 fp8 products with A of the cache's format (kE5m2: e5m2, else e4m3) and B e4m3: A from
// shared memory, or from registers (rs).
template <bool kE5m2>
__device__ __forceinline__ void wgmma_m64n32k32_f8(float (&d)[16], uint64_t a, uint64_t b, int acc) {
  if constexpr (kE5m2) wgmma_m64n32k32_ss_e5m2_e4m3(d, a, b, acc);
  else wgmma_m64n32k32_ss_e4m3_e4m3(d, a, b, acc);
}

template <bool kE5m2>
__device__ __forceinline__ void wgmma_m64n32k32_rs_f8(float (&d)[16], const uint32_t* a, uint64_t b, int acc) {
  if constexpr (kE5m2) wgmma_m64n32k32_rs_e5m2_e4m3(d, a, b, acc);
  else wgmma_m64n32k32_rs_e4m3_e4m3(d, a, b, acc);
}

// m64n64k32 fp8 products with A of the cache's format (kE5m2: e5m2, else e4m3) and B e4m3: A from
// shared memory (ss) or from registers (rs).
template <bool kE5m2>
__device__ __forceinline__ void wgmma_m64n64k32_ss_f8(float (&d)[32], uint64_t a, uint64_t b, int acc) {
  if constexpr (kE5m2) wgmma_m64n64k32_ss_e5m2_e4m3(d, a, b, acc);
  else wgmma_m64n64k32_ss_e4m3_e4m3(d, a, b, acc);
}
template <bool kE5m2>
__device__ __forceinline__ void wgmma_m64n64k32_rs_f8(float (&d)[32], const uint32_t* a, uint64_t b, int acc) {
  if constexpr (kE5m2) wgmma_m64n64k32_rs_e5m2_e4m3(d, a, b, acc);
  else wgmma_m64n64k32_rs_e4m3_e4m3(d, a, b, acc);
}

template <typename T>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t a, uint64_t b, int acc) {
  if constexpr (std::is_same<T, gpu_bf16>::value) wgmma_m64n64k16_ss_bf16(d, a, b, acc);
  else wgmma_m64n64k16_ss_f16(d, a, b, acc);
}
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16_rs_tb(float (&d)[128], const uint32_t (&a)[4], uint64_t b,
                                                       int acc) {
  if constexpr (std::is_same<T, gpu_bf16>::value) wgmma_m64n256k16_rs_tb_bf16(d, a, b, acc);
  else wgmma_m64n256k16_rs_tb_f16(d, a, b, acc);
}
template <typename T>
__device__ __forceinline__ void wgmma_m64n256k16_ss_tb(float (&d)[128], uint64_t a, uint64_t b, int acc) {
  if constexpr (std::is_same<T, gpu_bf16>::value) wgmma_m64n256k16_ss_tb_bf16(d, a, b, acc);
  else wgmma_m64n256k16_ss_tb_f16(d, a, b, acc);
}
#endif

}  // namespace jaxpaged
