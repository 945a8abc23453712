// MLA decode on Hopper warpgroup tensor cores (wgmma; built for sm_90a only), warp-specialized.
//
// Block = 64 query rows (of one sequence's s_q x Hq) x one partition of the KV work
// (partition_schedule.cuh); 384 threads = three warpgroups:
//   warpgroup 2 (loader): streams the partition's keys in 32-token tiles (576 wide) through a
//     ring of four shared-memory stages with cp.async, page ids a tile ahead. Each stage has a
//     "full" mbarrier (its copies landed) and an "empty" one (both compute warpgroups are done
//     with it), so the loader runs up to two tile pairs ahead without meeting the others.
//   warpgroups 0 and 1 (compute): take the tiles in pairs (t0, t1) and split the work "seesaw"
//     fashion so both do the same amount and one's softmax overlaps the other's products:
//       WG0: S0 = Q K0^T, online softmax -> running max m0 and P0; O_L += P0 V0[:, 0:256]
//       WG1: S1 = Q K1^T; with m0: m1 = max(m0, rowmax S1), P1;  O_R += P0 V0[:, 256:512] + P1 V1[:, 256:512]
//       WG0: O_L += P1 V1[:, 0:256]   (after rescaling O_L from m0 to m1)
//     P0, P1 and the maxima cross over through shared memory (named barriers 1: WG0 -> WG1 and
//     2: WG1 -> WG0). A P tile is written over its key tile's 64 rope columns, which only S reads.
//     Each compute warpgroup keeps its 256 output columns in registers (128 floats per thread).
// Tiles are stored with the 128-byte swizzle, so each is at once the K operand (K-major) of
// S = Q K^T and the V operand (MN-major, its first 512 columns) of O = P V. The rows' queries
// (512 latent + 64 rope) stay in shared memory; S reads both operands from there.
// Rows past the sequence's s_q x Hq, keys past kv_len or past a causal row's last key get
// probability 0; their K/V bytes are zero-filled (0 * garbage must not reach a product).
#pragma once

#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "common/mbarrier_sm90.cuh"
#include "common/mma_sm80.cuh"
#include "common/wgmma_sm90.cuh"
#include "mla_decode/params.h"
#include "mla_decode/partition_schedule.cuh"

namespace jaxpaged {

constexpr int kMlaWgThreads = 384;  // two compute warpgroups + one loader
constexpr int kMlaWgRows = 64;      // query rows per block: the wgmma M
constexpr int kMlaWgKeys = 32;      // cache tokens per tile (the schedule counts 64-token tiles = pairs)
constexpr int kMlaWgStages = 4;     // two pairs: one computed while the next lands
// Registers per thread after the loader hands its share over. The block starts with 168 per
// thread (65536 / 384, rounded down to a multiple of 8); a warpgroup that asks for more than the
// others gave back waits forever, so the new budgets must fit in the same 3 x 168.
constexpr int kMlaWgComputeRegs = 232;
constexpr int kMlaWgLoaderRegs = 40;
static_assert(2 * kMlaWgComputeRegs + kMlaWgLoaderRegs <= 3 * (65536 / kMlaWgThreads / 8 * 8),
              "register budgets exceed the block's registers");

// Shared memory, byte offsets from a 1024-aligned base (the swizzle atoms must be 1024-aligned).
struct MlaWgSmem {
  static constexpr int kWidth = kMlaLatentDim + kMlaRopeDim;  // 576
  static constexpr int kColBlocks = kWidth / 64;              // 9 column blocks of 128 bytes
  static constexpr int kQColBlockBytes = kMlaWgRows * 128;    // 8 KiB
  static constexpr int kKvColBlockBytes = kMlaWgKeys * 128;   // 4 KiB = one 64 x 32 P tile
  static constexpr int kStageBytes = kColBlocks * kKvColBlockBytes;
  static constexpr int kRopeBlock = 8 * kKvColBlockBytes;     // where a stage's P goes after S
  static constexpr int kQ = 0;
  static constexpr int kStage0 = kColBlocks * kQColBlockBytes;
  static constexpr int kMax = kStage0 + kMlaWgStages * kStageBytes;  // [2 warpgroups][128 threads][2] floats
  static constexpr int kSum = kMax + 2 * 128 * 2 * 4;                // same shape: row sums at the end
  static constexpr int kBadPage = kSum + 2 * 128 * 2 * 4;            // [stage][loader warp] ints
  static constexpr int kBarriers = kBadPage + kMlaWgStages * 4 * 4;  // full[stages], empty[stages]
  static constexpr size_t kAllocBytes = size_t(kBarriers) + 2 * kMlaWgStages * 8 + 1024;  // + alignment
};

// Rows' running maxima and masking state of one compute thread (rows r_lo and r_hi).
struct MlaRowPair {
  float lo, hi;
};

// The four 16-byte words of a thread's P fragments for one 64 x 32 tile, interleaved by thread in
// the stage's rope block so the stores and loads are conflict-free.
__device__ __forceinline__ void store_p(unsigned char* rope_block, int tw, const uint32_t (&pa)[8]) {
  uint4* dst = reinterpret_cast<uint4*>(rope_block);
#pragma unroll
  for (int q = 0; q < 2; ++q) dst[q * 128 + tw] = make_uint4(pa[4 * q], pa[4 * q + 1], pa[4 * q + 2], pa[4 * q + 3]);
}
__device__ __forceinline__ void load_p(const unsigned char* rope_block, int tw, uint32_t (&pa)[8]) {
  const uint4* src = reinterpret_cast<const uint4*>(rope_block);
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const uint4 v = src[q * 128 + tw];
    pa[4 * q] = v.x;
    pa[4 * q + 1] = v.y;
    pa[4 * q + 2] = v.z;
    pa[4 * q + 3] = v.w;
  }
}

template <typename T>
__device__ __forceinline__ uint32_t scale_pack2(uint32_t v, float s) {
  float2 f;
  if constexpr (std::is_same<T, gpu_bf16>::value) {
    f = __bfloat1622float2(*reinterpret_cast<const gpu_bf16x2*>(&v));
  } else {
    f = __half22float2(*reinterpret_cast<const __half2*>(&v));
  }
  return pack2<T>(f.x * s, f.y * s);
}

// Copies one thread's 16-byte chunk of a 576-wide row into the nine swizzled column blocks at dst
// (block_bytes apart): blocks 0-7 from the 512-wide latent part, block 8 from the 64-wide rope
// part. `latent` and `rope` point at the thread's chunk of the row; an invalid row is zero-filled
// (its pointers must still be addresses the copy may name, but nothing is read from them).
template <typename T>
__device__ __forceinline__ void copy_row_chunk(unsigned char* dst, int block_bytes, const T* latent,
                                               const T* rope, bool valid) {
#pragma unroll
  for (int cb = 0; cb < MlaWgSmem::kColBlocks; ++cb) {
    cp_async_16(dst + cb * block_bytes, cb < MlaWgSmem::kColBlocks - 1 ? latent + cb * 64 : rope, valid);
  }
}

template <typename T>
__global__ void __launch_bounds__(kMlaWgThreads, 1)
    mla_wgmma_kernel(const MlaDecodeParams p, int page_shift, int row_blocks, const MlaSchedule s,
                     float* __restrict__ ws_out, float* __restrict__ ws_lse) {
#if defined(JP_HAVE_WGMMA)
  using S = MlaWgSmem;
  extern __shared__ unsigned char smem_raw[];
  // Offset from smem_raw (not an integer cast) so the compiler still knows these are shared addresses.
  unsigned char* base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  float* sMax = reinterpret_cast<float*>(base + S::kMax);
  float* sSum = reinterpret_cast<float*>(base + S::kSum);
  int* sBadPage = reinterpret_cast<int*>(base + S::kBadPage);
  uint64_t* full = reinterpret_cast<uint64_t*>(base + S::kBarriers);
  uint64_t* empty = full + kMlaWgStages;

  const int tid = threadIdx.x, tw = tid % 128, lane = tid % 32;
  // Through a shuffle so the compiler knows it is the same in a warp (wgmma under branches on it
  // would otherwise be serialized).
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  const int part = blockIdx.x / row_blocks, rb = blockIdx.x % row_blocks;
  const int first_b = s.part_first[part], last_b = s.part_last[part];
  const int64_t rows_per_b = p.s_q * p.num_heads;
  const int64_t row0 = int64_t(rb) * kMlaWgRows;
  const int64_t capacity = p.max_pages * p.page_size;
  // Eight consecutive threads fill one 128-byte row (chunk ld_chunk), so global reads coalesce
  // and the swizzled stores hit eight bank groups.
  const int ld_chunk = tid % 8;

  if (tid == 0) {
    for (int st = 0; st < kMlaWgStages; ++st) {
      mbar_init(&full[st], 2 * 128);  // each loader thread: its copies landed + its flags written
      mbar_init(&empty[st], 8);       // each compute warp is done with the stage
    }
  }
  __syncthreads();

  // The tiles of sequence b this block processes: [begin, end) in 32-token units.
  auto tile_range = [&](int b, int64_t kv_len) {
    const TileSpan span = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
    constexpr int kPerSpanTile = kMlaTileKeys / kMlaWgKeys;
    return TileSpan{span.begin * kPerSpanTile,
                    min(span.end * kPerSpanTile, int((kv_len + kMlaWgKeys - 1) / kMlaWgKeys))};
  };

  if (wg == 2) {
    // ---------------------------------------------------------------- loader warpgroup
    warpgroup_regs_shrink<kMlaWgLoaderRegs>();
    const T* ckv = static_cast<const T*>(p.ckv);
    const T* kpe = static_cast<const T*>(p.kpe);
    const int kv_row = tw / 8;  // tokens kv_row and kv_row + 16 of a tile
    int n = 0;                  // tiles loaded so far by this block (all its sequences)
    for (int b = first_b; b <= last_b; ++b) {
      const int64_t kv_len = clamp_kv_len(p.kv_lens[b], capacity);
      const TileSpan tiles = tile_range(b, kv_len);
      const int32_t* table = p.block_tables + int64_t(b) * p.max_pages;
      auto entry = [&](int tile, int h) -> int32_t {
        const int64_t j = int64_t(tile) * kMlaWgKeys + kv_row + 16 * h;
        return j < kv_len ? table[j >> page_shift] : 0;
      };
      int32_t e0 = 0, e1 = 0;  // page ids of this thread's two tokens, read a tile ahead
      if (tiles.begin < tiles.end) {
        e0 = entry(tiles.begin, 0);
        e1 = entry(tiles.begin, 1);
      }
      for (int u = tiles.begin; u < tiles.end; ++u, ++n) {
        const int st = n % kMlaWgStages;
        mbar_wait(&empty[st], ((n / kMlaWgStages) & 1) ^ 1);
        bool bad = false;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = kv_row + 16 * h;
          const int32_t e = h ? e1 : e0;
          unsigned char* dst = base + S::kStage0 + st * S::kStageBytes + r * 128 + ((ld_chunk ^ (r % 8)) * 16);
          const int64_t j = int64_t(u) * kMlaWgKeys + r;
          bool valid = j < kv_len;
          if (valid && (e < 0 || e >= p.num_pages)) {
            valid = false;
            bad = true;
          }
          const int64_t page = valid ? e : 0;
          const int64_t slot = j & (p.page_size - 1);
          copy_row_chunk(dst, S::kKvColBlockBytes,
                         ckv + page * p.ckv_page_stride + slot * p.ckv_slot_stride + ld_chunk * 8,
                         kpe + page * p.kpe_page_stride + slot * p.kpe_slot_stride + ld_chunk * 8, valid);
        }
        mbar_arrive_on_cp_async(&full[st]);
        bad = __any_sync(0xffffffffu, bad);
        if (lane == 0) sBadPage[st * 4 + tw / 32] = bad ? 1 : 0;
        mbar_arrive(&full[st]);
        if (u + 1 < tiles.end) {
          e0 = entry(u + 1, 0);
          e1 = entry(u + 1, 1);
        }
      }
    }
    return;
  }

  // ------------------------------------------------------------------ compute warpgroups
  warpgroup_regs_grow<kMlaWgComputeRegs>();
  constexpr int kComputeThreads = 256;
  constexpr int kBarP0 = 1, kBarP1 = 2, kBarCompute = 3;
  const uint64_t q_desc = wgmma_desc_sw128(smem_addr(base + S::kQ), 16, 1024);
  const float qk_scale = p.scale * kLog2e;
  // This thread's two rows in the accumulator layout (the same in both warpgroups).
  const int r_lo = (tw / 32) * 16 + lane / 4, r_hi = r_lo + 8;
  float* my_max = sMax + wg * 256 + 2 * tw;        // what this thread publishes
  const float* peer_max = sMax + (1 - wg) * 256 + 2 * tw;  // what the other warpgroup's twin did
  const T* q_nope = static_cast<const T*>(p.q_nope);
  const T* q_pe = static_cast<const T*>(p.q_pe);
  auto stage_ptr = [&](int st) { return base + S::kStage0 + st * S::kStageBytes; };
  auto stage_bad = [&](int st) {
    const int4 f = *reinterpret_cast<const int4*>(sBadPage + st * 4);
    return (f.x | f.y | f.z | f.w) != 0;
  };
  auto wait_full = [&](int n) {
    mbar_wait(&full[n % kMlaWgStages], (n / kMlaWgStages) & 1);
    fence_proxy_async_shared();  // the landed bytes, for wgmma's async-proxy reads
  };
  auto release = [&](int n) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[n % kMlaWgStages]);
  };
  // O_half += P V[:, half] for a 32-token tile (2 wgmma m64n256k16, A = P from registers).
  auto pv = [&](float (&o)[128], const uint32_t (&pa)[8], int st) {
    const uint64_t v_desc = wgmma_desc_sw128(smem_addr(stage_ptr(st)) + 4 * wg * S::kKvColBlockBytes,
                                             S::kKvColBlockBytes, 1024);
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const uint32_t a[4] = {pa[4 * kk], pa[4 * kk + 1], pa[4 * kk + 2], pa[4 * kk + 3]};
      wgmma_m64n256k16_rs_tb<T>(o, a, wgmma_desc_advance(v_desc, kk * 16 * 128), 1);
    }
  };
  // S = Q K^T for a 32-token tile (36 wgmma m64n32k16, both operands from shared memory), scaled
  // to the log2 domain, with masked keys at -inf; returns the rows' maxima over the tile.
  auto scores = [&](float (&sacc)[16], int st, int u, int64_t end_lo, int64_t end_hi) {
#pragma unroll
    for (int i = 0; i < 16; ++i) sacc[i] = 0.f;
    const uint64_t k_desc = wgmma_desc_sw128(smem_addr(stage_ptr(st)), 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < S::kWidth / 16; ++ks) {
      wgmma_m64n32k16_ss<T>(sacc, wgmma_desc_advance(q_desc, (ks / 4) * S::kQColBlockBytes + (ks % 4) * 32),
                            wgmma_desc_advance(k_desc, (ks / 4) * S::kKvColBlockBytes + (ks % 4) * 32), ks > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 16; ++i) reg_fence(sacc[i]);
    // Accumulator j of this thread: key 8 (j / 4) + 2 (lane % 4) + j % 2 of the tile, row r_lo
    // for j % 4 < 2, else r_hi. Keys are compared as offsets in the tile.
    const int64_t tile0 = int64_t(u) * kMlaWgKeys + 2 * (lane % 4);
    const int lim_lo = int(max(int64_t(-1), min(end_lo - tile0, int64_t(kMlaWgKeys))));
    const int lim_hi = int(max(int64_t(-1), min(end_hi - tile0, int64_t(kMlaWgKeys))));
    MlaRowPair mx{-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int key = 8 * (j / 4) + (j % 2);
      const bool hi = (j % 4) >= 2;
      sacc[j] = key < (hi ? lim_hi : lim_lo) ? sacc[j] * qk_scale : -INFINITY;
      if (hi) mx.hi = fmaxf(mx.hi, sacc[j]);
      else mx.lo = fmaxf(mx.lo, sacc[j]);
    }
#pragma unroll
    for (int off = 1; off <= 2; off *= 2) {  // the 4 threads of a quad hold one row
      mx.lo = fmaxf(mx.lo, JP_SHFL_XOR(mx.lo, off));
      mx.hi = fmaxf(mx.hi, JP_SHFL_XOR(mx.hi, off));
    }
    return mx;
  };
  // P = exp2(S - m) as 16-bit wgmma A fragments; returns the rows' sums (this thread's share).
  auto probabilities = [&](float (&sacc)[16], MlaRowPair m, uint32_t (&pa)[8]) {
    const float base_lo = m.lo == -INFINITY ? 0.f : m.lo, base_hi = m.hi == -INFINITY ? 0.f : m.hi;
    MlaRowPair sum{0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 16; ++j) {  // exp2(-inf) = 0 for masked keys
      const bool hi = (j % 4) >= 2;
      sacc[j] = fast_exp2(sacc[j] - (hi ? base_hi : base_lo));
      if (hi) sum.hi += sacc[j];
      else sum.lo += sacc[j];
    }
    // Accumulator layout -> A layout: keys 16 kk .. 16 kk + 15 are accumulator groups 2 kk, 2 kk + 1.
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
      for (int i = 0; i < 4; ++i) pa[4 * kk + i] = pack2<T>(sacc[8 * kk + 2 * i], sacc[8 * kk + 2 * i + 1]);
    }
    return sum;
  };
  auto max_of = [](MlaRowPair a, MlaRowPair b) { return MlaRowPair{fmaxf(a.lo, b.lo), fmaxf(a.hi, b.hi)}; };
  // exp2(from - to) per row for running maxima moving from `from` to `to` (>= from); 1 while -inf.
  auto rescale = [](MlaRowPair from, MlaRowPair to) {
    auto f = [](float a, float b) { return b == -INFINITY ? 1.f : fast_exp2(a - b); };
    return MlaRowPair{f(from.lo, to.lo), f(from.hi, to.hi)};
  };
  // This thread's rows' maxima, for its twin in the other warpgroup (which waits on barrier `bar`).
  auto publish_max = [&](MlaRowPair mm, int bar) {
    my_max[0] = mm.lo;
    my_max[1] = mm.hi;
    named_barrier_arrive(bar, kComputeThreads);
  };
  auto scale_o = [&](float (&o)[128], MlaRowPair c) {
    if (__any_sync(0xffffffffu, c.lo != 1.f || c.hi != 1.f)) {
#pragma unroll
      for (int j = 0; j < 128; ++j) o[j] *= (j % 4) < 2 ? c.lo : c.hi;
    }
  };

  // Copies the 64 query rows of sequence b into shared memory with `threads` threads (rows past
  // the sequence's s_q x Hq read as 0); the caller waits for its cp.async group.
  auto load_queries = [&](int b, int t, int threads) {
    const int rows_per_pass = threads / 8;
    for (int r = t / 8; r < kMlaWgRows; r += rows_per_pass) {
      const bool live = row0 + r < rows_per_b;
      const int64_t g = int64_t(b) * rows_per_b + (live ? row0 + r : 0);
      unsigned char* dst = base + S::kQ + r * 128 + ((ld_chunk ^ (r % 8)) * 16);
      copy_row_chunk(dst, S::kQColBlockBytes, q_nope + g * kMlaLatentDim + ld_chunk * 8,
                     q_pe + g * kMlaRopeDim + ld_chunk * 8, live);
    }
    cp_async_commit();
  };

  int n = 0;                 // tiles consumed so far (mirrors the loader's count)
  bool q_in_flight = false;  // warpgroup 0 already issued this sequence's queries (see below)
  for (int b = first_b; b <= last_b; ++b) {
    const int64_t kv_len = clamp_kv_len(p.kv_lens[b], capacity);
    const TileSpan tiles = tile_range(b, kv_len);
    // Both warpgroups are done with the previous sequence's queries and crossing buffers.
    named_barrier_sync(kBarCompute, kComputeThreads);
    if (!q_in_flight) load_queries(b, tid, kComputeThreads);
    cp_async_wait<0>();
    fence_proxy_async_shared();
    named_barrier_sync(kBarCompute, kComputeThreads);
    // Once both warpgroups' last S of this sequence is done (warpgroup 0 knows at the last
    // pair's P1 barrier), warpgroup 0 fetches the next sequence's queries, hiding their latency
    // behind the last products and the epilogue.
    q_in_flight = tiles.begin < tiles.end && b < last_b;
    // Each row's visible keys end at row_end (causal rows see fewer); dead rows see none.
    auto row_end = [&](int r) -> int64_t {
      if (row0 + r >= rows_per_b) return 0;
      return p.causal ? visible_keys(kv_len, p.s_q, (row0 + r) / p.num_heads, 0).end : kv_len;
    };
    const int64_t end_lo = row_end(r_lo), end_hi = row_end(r_hi);
    MlaRowPair m{-INFINITY, -INFINITY};  // running max (log2 domain) at the start of a pair
    MlaRowPair l{0.f, 0.f};              // this thread's share of the running sums
    bool bad = false;                    // a page id of this sequence was out of range
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;

    for (int u = tiles.begin; u < tiles.end; u += 2) {
      const bool has1 = u + 1 < tiles.end;
      const int n0 = n, n1 = n + 1;
      const int st0 = n0 % kMlaWgStages, st1 = n1 % kMlaWgStages;
      n += has1 ? 2 : 1;
      float sacc[16];
      uint32_t pa[8], pb[8];  // P0, P1 as A fragments
      if (wg == 0) {
        wait_full(n0);
        bad |= stage_bad(st0);
        const MlaRowPair mx = scores(sacc, st0, u, end_lo, end_hi);
        const MlaRowPair m0 = max_of(m, mx);
        const MlaRowPair sum = probabilities(sacc, m0, pa);
        store_p(stage_ptr(st0) + S::kRopeBlock, tw, pa);  // S0 is done with K0's rope columns
        publish_max(m0, kBarP0);
        const MlaRowPair c = rescale(m, m0);
        l = {l.lo * c.lo + sum.lo, l.hi * c.hi + sum.hi};
        scale_o(o, c);
#pragma unroll
        for (int i = 0; i < 8; ++i) reg_fence(pa[i]);
        wgmma_fence();
        pv(o, pa, st0);
        wgmma_commit();
        named_barrier_sync(kBarP1, kComputeThreads);  // warpgroup 1 published m1 (and P1)
        if (q_in_flight && u + 2 >= tiles.end) load_queries(b + 1, tw, 128);
        const MlaRowPair m1{peer_max[0], peer_max[1]};
        const MlaRowPair c1 = rescale(m0, m1);
        l = {l.lo * c1.lo, l.hi * c1.hi};
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < 128; ++i) reg_fence(o[i]);
        scale_o(o, c1);
        if (has1) {
          wait_full(n1);  // long landed (warpgroup 1 computed S1 on it); makes it visible here
          bad |= stage_bad(st1);
          load_p(stage_ptr(st1) + S::kRopeBlock, tw, pb);
          wgmma_fence();
          pv(o, pb, st1);
          wgmma_commit();
          wgmma_wait<0>();
#pragma unroll
          for (int i = 0; i < 128; ++i) reg_fence(o[i]);
        }
        m = m1;
      } else {
        MlaRowPair mx{-INFINITY, -INFINITY};
        if (has1) {
          wait_full(n1);
          bad |= stage_bad(st1);
          mx = scores(sacc, st1, u + 1, end_lo, end_hi);
        }
        named_barrier_sync(kBarP0, kComputeThreads);  // warpgroup 0 published m0 and P0
        const MlaRowPair m0{peer_max[0], peer_max[1]};
        const MlaRowPair m1 = max_of(m0, mx);
        MlaRowPair sum{0.f, 0.f};
        if (has1) {
          sum = probabilities(sacc, m1, pb);
          store_p(stage_ptr(st1) + S::kRopeBlock, tw, pb);  // S1 is done with K1's rope columns
        }
        load_p(stage_ptr(st0) + S::kRopeBlock, tw, pa);
        publish_max(m1, kBarP1);
        const MlaRowPair c = rescale(m, m1);
        l = {l.lo * c.lo + sum.lo, l.hi * c.hi + sum.hi};
        scale_o(o, c);
        // P0 was made against m0; bring it to m1 (a no-op once the maxima settle).
        const MlaRowPair cp = rescale(m0, m1);
        if (__any_sync(0xffffffffu, cp.lo != 1.f || cp.hi != 1.f)) {
#pragma unroll
          for (int i = 0; i < 8; ++i) pa[i] = scale_pack2<T>(pa[i], (i % 2) == 0 ? cp.lo : cp.hi);
        }
        wait_full(n0);
        bad |= stage_bad(st0);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          reg_fence(pa[i]);
          reg_fence(pb[i]);
        }
        wgmma_fence();
        pv(o, pa, st0);
        if (has1) pv(o, pb, st1);
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < 128; ++i) reg_fence(o[i]);
        m = m1;
      }
      release(n0);
      if (has1) release(n1);
    }

    // Epilogue: the row sums are the two warpgroups' shares (both against the same final max).
#pragma unroll
    for (int off = 1; off <= 2; off *= 2) {
      l.lo += JP_SHFL_XOR(l.lo, off);
      l.hi += JP_SHFL_XOR(l.hi, off);
    }
    sSum[wg * 256 + 2 * tw] = l.lo;
    sSum[wg * 256 + 2 * tw + 1] = l.hi;
    named_barrier_sync(kBarCompute, kComputeThreads);
    const float sum_lo = l.lo + sSum[(1 - wg) * 256 + 2 * tw];
    const float sum_hi = l.hi + sSum[(1 - wg) * 256 + 2 * tw + 1];
    const bool whole = s.seq_pieces[b] == 1;
    const int slot = whole ? 0 : mla_piece_slot(s, part, b);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = half ? r_hi : r_lo;
      if (row0 + r >= rows_per_b) continue;
      const float sum = half ? sum_hi : sum_lo;
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const int64_t row = int64_t(b) * rows_per_b + row0 + r;
      const int64_t ws_row = int64_t(slot) * rows_per_b + row0 + r;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int col = 256 * wg + 8 * j + 2 * (lane % 4);
        const float x0 = bad ? NAN : o[4 * j + 2 * half] * inv;
        const float x1 = bad ? NAN : o[4 * j + 2 * half + 1] * inv;
        if (whole) {
          *reinterpret_cast<uint32_t*>(static_cast<T*>(p.out) + row * kMlaLatentDim + col) = pack2<T>(x0, x1);
        } else {
          *reinterpret_cast<float2*>(ws_out + ws_row * kMlaLatentDim + col) = make_float2(x0, x1);
        }
      }
      if (wg == 0 && lane % 4 == 0) {
        const float mrow = half ? m.hi : m.lo;
        const float lse = bad ? NAN : (sum > 0.f ? (mrow + __log2f(sum)) * kLn2 : -INFINITY);
        if (whole) p.lse[row] = lse;
        else ws_lse[ws_row] = lse;
      }
    }
  }
#endif
}

}  // namespace jaxpaged
