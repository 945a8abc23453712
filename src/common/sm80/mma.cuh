// Warp-level tensor-core building blocks available from sm_80 on (Ampere and Hopper): the m16n8k16
// matrix product with float accumulation, ldmatrix fragment loads, and cp.async copies.
// Fragment layouts follow the PTX ISA's mma.m16n8k16 description.
#pragma once

#include <cstdint>

#include "gpu_vendor.h"

namespace jaxpaged {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; copies `valid ? 16 : 0` bytes and zero-fills the rest, so masked
// rows read as 0 (garbage or NaN must never reach a product: 0 * NaN is NaN).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
// 8 bytes (through L1: cp.async.cg takes 16 only); zero-filled when !valid.
__device__ __forceinline__ void cp_async_8(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 8 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
// ("memory": no shared-memory access of this thread may move above the wait - the wide MLA kernel
// reads its own copies right after it, with no barrier between)
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// Four 8x8 b16 matrices; lane i supplies the row address of matrix i / 8 (a 32-bit shared-memory
// address, or a pointer into shared memory); register q receives matrix q in the mma fragment
// layout. The fp8 kernels also read byte pairs of raw fp8 tiles with them.
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* smem) { ldmatrix_x4(r, smem_addr(smem)); }
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* smem) {
  ldmatrix_x4_trans(r, smem_addr(smem));
}

// The transpose of one 8x8 b16 matrix held in the mma fragment layout (lane i: row i / 4,
// elements 2 (i % 4) and + 1): lane i receives row i / 4 of the transpose. (sm_75 and later.)
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// D = A * B + D for one m16n8k16 tile, 16-bit inputs (T = gpu_half or gpu_bf16), float accumulators.
template <typename T>
__device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2]);

template <>
__device__ __forceinline__ void mma_16816<gpu_bf16>(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ __forceinline__ void mma_16816<gpu_half>(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace jaxpaged
