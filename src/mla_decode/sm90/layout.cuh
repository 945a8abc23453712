// Shared memory, register budgets and shared-memory views of the MLA Hopper kernel (kernel.cuh),
// used by its loader (loader.cuh) and compute warpgroups (compute.cuh).
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/gpu_math.cuh"
#include "common/sm90/mbarrier.cuh"
#include "mla_decode/params.h"
#include "mla_decode/workspace.h"

namespace jaxpaged {

constexpr int kMlaWgThreads = 384;          // two compute warpgroups + one loader
constexpr int kMlaWgKeys = kMlaTileKeys;    // cache tokens per tile (the schedule's unit)
// Registers per thread after the loader hands its share over. The block starts with 168 per
// thread (65536 / 384, rounded down to a multiple of 8); a warpgroup that asks for more than the
// others gave back waits forever, so the new budgets must fit in the same 3 x 168. The cp.async
// loader needs 56 to issue its copies fully unrolled (at 40 it spilled or, with loops kept
// rolled, became instruction-bound and starved the compute warpgroups: NOTES item 22); the TMA
// loader is one thread with a handful of values. The quantized loader (one issuing warp, three
// converting ones, each converting lane holding two raw 16-byte chunks) fits the same budget.
// The split schedule (656-byte rows, kernel.cuh) gives warpgroup 0 (S, softmax, P V_L) 224,
// warpgroup 1 (P V_R only: its O half) 168 - the block's starting share, so its setmaxnreg.dec is
// a no-op that only tells ptxas the budget - and the loader (mla_load_tiles_ds_regs: a refill's
// raw bytes in flight while it converts the one before) 112.
template <bool kTma, int kFmt = kMlaSame>
struct MlaWgRegs {
  static constexpr bool kSplit = !kTma && kFmt == kMlaDsRows;
  static constexpr int kCompute = kTma ? 232 : 224;
  static constexpr int kLoader = kTma ? 32 : (kSplit ? 112 : 56);
  static constexpr int kSplitS = 224, kSplitPv = 168;
  static_assert(!kSplit || kSplitS + kSplitPv + kLoader <= 3 * (65536 / kMlaWgThreads / 8 * 8),
                "register budgets exceed the block's registers");
  static_assert(kSplit || 2 * kCompute + kLoader <= 3 * (65536 / kMlaWgThreads / 8 * 8),
                "register budgets exceed the block's registers");
};

// The tensor cores' operand type for tiles of cache format kFmt with T queries and output. fp8
// caches with a per-tensor scale (kMlaFp8) are read as half whatever T is: every e4m3 and e5m2
// value is a half, and the loader's conversion is then one instruction per two values (to bf16 it
// takes four: fp8 -> half2 -> two floats -> bf16x2), which bounded that path (NOTES item 42); bf16
// queries are then brought into half by a power of two per row (compute.cuh, convert_queries).
// 656-byte rows (values times per-token scales, rounded) and 16-bit caches keep T.
template <typename T, int kFmt>
using MlaTileT = typename std::conditional<kFmt == kMlaFp8, gpu_half, T>::type;

// Column groups of a tile buffer, each with its own full/empty barrier pair.
enum MlaColGroup : int { kGroupL = 0, kGroupR = 1, kGroupRope = 2, kGroups = 3 };
// The order in which the groups of a pair's buffers fall free (and are refilled and then read by
// the next S): buffer 0's L (after WG0's P0 V0_L), buffer 1's R (after WG1's P1 V1_R), buffer 0's
// R and rope (after WG1's P0 V0_R), buffer 1's L and rope (after WG0's P1 V1_L). The k-th group an
// S reads of buffer buf is mla_group_in_order(buf, k): buffer 1's tile is read R, L, rope.
__device__ __forceinline__ constexpr int mla_group_in_order(int buf, int k) {
  return buf == 0 || k == 2 ? k : 1 - k;
}
// The loaders' six steps of a pair, in that order: step s refills the k-th group (in S's reading
// order) of buffer mla_refill_buf(s), k = mla_refill_order(s); k = 0 is a tile's first refill.
__device__ __forceinline__ constexpr int mla_refill_buf(int step) {
  constexpr int kBuf[6] = {0, 1, 0, 0, 1, 1};
  return kBuf[step];
}
__device__ __forceinline__ constexpr int mla_refill_order(int step) {
  constexpr int kOrder[6] = {0, 0, 1, 2, 1, 2};
  return kOrder[step];
}

// Shared memory, byte offsets from a 1024-aligned base (the swizzle atoms must be 1024-aligned).
struct MlaWgSmem {
  static constexpr int kWidth = kMlaLatentDim + kMlaRopeDim;  // 576
  static constexpr int kColBlocks = kWidth / 64;              // 9 column blocks of 128 bytes
  static constexpr int kColBlockBytes = 64 * 128;             // 64 rows (queries or keys): 8 KiB
  static_assert(kMlaWgRows == 64 && kMlaWgKeys == 64, "a column block holds 64 rows");
  static constexpr int kTileBytes = kColBlocks * kColBlockBytes;  // 72 KiB
  static constexpr int kRopeBlock = 8 * kColBlockBytes;           // where a tile's P goes after S
  static constexpr int kQ = 0;
  static constexpr int kTile0 = kTileBytes;                       // two tile buffers follow Q
  static constexpr int kMax = kTile0 + 2 * kTileBytes;  // [2 warpgroups][128 threads][2] floats
  static constexpr int kSum = kMax + 2 * 128 * 2 * 4;   // same shape: row sums at the end
  static constexpr int kBad = kSum + 2 * 128 * 2 * 4;   // [2 buffers][4 loader warps] + [2 warpgroups] ints
  static constexpr int kKeyMask = kBad + 16 * 4;       // [2 buffers][64 tokens] bytes (sparse keys)
  // The loader's page ids of a pair: [2 buffers][4 tokens][128 loader threads] (16-bit gather);
  // fp8 caches: [2 buffers][64 tokens] byte offsets (int64).
  static constexpr int kPages = kKeyMask + 2 * 64;
  static constexpr int kBarriers = kPages + 2 * 4 * 128 * 4;  // full[2][3], empty[2][3], landed[2][3]
  static constexpr int kQBarriers = kBarriers + 3 * 2 * kGroups * 8;  // q_full, q_empty
  static constexpr size_t kAllocBytes = size_t(kQBarriers) + 2 * 8 + 1024;  // + alignment
};
static_assert(MlaWgSmem::kAllocBytes <= 227 * 1024, "more shared memory than a Hopper block may have");

// The kernel's views of its shared memory (MlaWgSmem), from the dynamic allocation.
struct MlaWgShared {
  unsigned char* base;
  float* sMax;
  float* sSum;
  int* sBadPage;   // [buffer][loader warp]
  int* sBadWg;     // [compute warpgroup], per sequence
  unsigned char* sKeyMask;  // [buffer][tile token]: 1 if the token is a key (sparse tiles)
  int* sPage;      // the loader's page ids of the current pair
  uint64_t* full;  // [buffer][group]
  uint64_t* empty;
  uint64_t* landed;  // [buffer][group]: a quantized group's raw bytes are in (loader.cuh)
  // The TMA loader's queries (kTma): q_full completes when a sequence's queries have landed,
  // q_empty when warpgroup 0 has seen both compute warpgroups' last S of a sequence.
  uint64_t* q_full;
  uint64_t* q_empty;

  __device__ __forceinline__ explicit MlaWgShared(unsigned char* smem_raw) {
    using S = MlaWgSmem;
    // Offset from smem_raw (not an integer cast) so the compiler still knows these are shared addresses.
    base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    sMax = reinterpret_cast<float*>(base + S::kMax);
    sSum = reinterpret_cast<float*>(base + S::kSum);
    sBadPage = reinterpret_cast<int*>(base + S::kBad);
    sBadWg = sBadPage + 8;
    sKeyMask = base + S::kKeyMask;
    sPage = reinterpret_cast<int*>(base + S::kPages);
    full = reinterpret_cast<uint64_t*>(base + S::kBarriers);
    empty = full + 2 * kGroups;
    landed = empty + 2 * kGroups;
    q_full = reinterpret_cast<uint64_t*>(base + S::kQBarriers);
    q_empty = q_full + 1;
  }
  __device__ __forceinline__ unsigned char* tile(int buf) const { return base + MlaWgSmem::kTile0 + buf * MlaWgSmem::kTileBytes; }
};

}  // namespace jaxpaged
