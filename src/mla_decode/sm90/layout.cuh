// Shared memory, register budgets and shared-memory views of the MLA Hopper kernel (kernel.cuh),
// used by its loader (loader.cuh) and compute warpgroups (compute.cuh).
#pragma once

#include <cstdint>

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
// loader is one thread with a handful of values. A converting loader (quantized caches) holds one
// phase's four raw 16-byte chunks in registers at once (its budget is the cp.async loader's today).
template <bool kTma, bool kConvert = false>
struct MlaWgRegs {
  static constexpr int kCompute = kTma ? 232 : (kConvert ? 224 : 224);
  static constexpr int kLoader = kTma ? 32 : (kConvert ? 56 : 56);
  static_assert(2 * kCompute + kLoader <= 3 * (65536 / kMlaWgThreads / 8 * 8),
                "register budgets exceed the block's registers");
};

// Column groups of a tile buffer, each with its own full/empty barrier pair.
enum MlaColGroup : int { kGroupL = 0, kGroupR = 1, kGroupRope = 2, kGroups = 3 };
// The order in which the groups of a pair's buffers fall free (and are refilled and then read by
// the next S): buffer 0's L (after WG0's P0 V0_L), buffer 1's R (after WG1's P1 V1_R), buffer 0's
// R and rope (after WG1's P0 V0_R), buffer 1's L and rope (after WG0's P1 V1_L). The k-th group an
// S reads of buffer buf is mla_group_in_order(buf, k): buffer 1's tile is read R, L, rope.
__device__ __forceinline__ constexpr int mla_group_in_order(int buf, int k) {
  return buf == 0 || k == 2 ? k : 1 - k;
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
  static constexpr int kBad = kSum + 2 * 128 * 2 * 4;   // [2 buffers][4 loader warps] + [2 warpgroups] ints, word 12: the loader's flag
  static constexpr int kKeyMask = kBad + 16 * 4;       // [2 buffers][64 tokens] bytes (sparse keys)
  static constexpr int kPages = kKeyMask + 2 * 64;     // [2 buffers][4 tokens][128 loader threads] page ids
  static constexpr int kBarriers = kPages + 2 * 4 * 128 * 4;  // full[2][3], empty[2][3]
  static constexpr size_t kAllocBytes = size_t(kBarriers) + 2 * 2 * kGroups * 8 + 1024;  // + alignment
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
  }
  __device__ __forceinline__ unsigned char* tile(int buf) const { return base + MlaWgSmem::kTile0 + buf * MlaWgSmem::kTileBytes; }
};

}  // namespace jaxpaged
