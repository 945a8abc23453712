// The compute warpgroups' operations in the MLA Hopper kernel (kernel.cuh strings them into the
// seesaw schedule of a pair of tiles): S = Q K^T issued group by group as the loader fills them,
// the masked row maxima and probabilities, P handed over through shared memory, O += P V from
// registers or from shared memory, and the rescales of O and of the running sums.
#pragma once

#include <type_traits>

#include "common/fp8.cuh"  // f16_query_exponent
#include "common/gpu_math.cuh"
#include "common/masking.h"  // visible_keys
#include "common/sm80/mma.cuh"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/wgmma.cuh"
#include "mla_decode/sm90/layout.cuh"
#include "mla_decode/sm90/loader.cuh"  // copy_row_chunk, for the queries

namespace jaxpaged {

// Rows' running maxima and masking state of one compute thread (rows r_lo and r_hi).
struct MlaRowPair {
  float lo, hi;
};

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

// Named barriers between the two compute warpgroups (0 is __syncthreads).
constexpr int kMlaComputeThreads = 256;
constexpr int kMlaBarM0 = 1;       // WG0 published m0
constexpr int kMlaBarP1 = 2;       // WG1 published m1 and stored P1
constexpr int kMlaBarP0 = 3;       // WG0 stored P0 (brought to m1)
constexpr int kMlaBarCompute = 4;  // both, at sequence boundaries
// The split schedule (kernel.cuh, mla_split_compute) uses ids 2 and 3 instead as "P and the
// rescale factors of buffer 0 / 1 are in" (warpgroup 0 arrives, warpgroup 1 waits).
constexpr int kMlaBarSplitP = 2;
constexpr int kMlaBarOwn = 5;      // + wg: this warpgroup alone

#if defined(JP_HAVE_WGMMA)  // the sm_90a device pass (wgmma.cuh)
// Where this thread's two rows' visible keys end in a sequence of kv_len keys (causal rows see
// fewer; rows past the sequence's s_q x Hq are never stored and see all keys, so they do not force
// masking; sparse lists are masked by the loader's marks alone, tile_max), and whether tile u
// reaches past some row's end in this warp (its scores then need masking).
struct MlaRowEnds {
  int lo, hi, min_end;
  bool sparse;
  __device__ __forceinline__ bool needs_mask(int u) const {
    return !sparse && gpu::any((u + 1) * kMlaWgKeys > min_end);
  }
};
template <bool kSparse>
__device__ __forceinline__ MlaRowEnds mla_row_ends(const MlaDecodeParams& p, int kv_len, int row0, int rows_per_b,
                                                   int r_lo, int r_hi) {
  auto row_end = [&](int r) -> int {
    if (row0 + r >= rows_per_b || !p.causal) return kv_len;
    return int(visible_keys(kv_len, p.s_q, (row0 + r) / p.num_heads, 0).end);
  };
  const int lo = kSparse ? 0 : row_end(r_lo), hi = kSparse ? 0 : row_end(r_hi);
  return MlaRowEnds{lo, hi, min(lo, hi), kSparse};
}

// One compute thread's view of the block: which rows it holds, where its shared state lives.
template <typename T, bool kTma, bool kSparse = false, int kFmt = kMlaSame>
struct MlaComputeWarpgroup {
  using S = MlaWgSmem;
  using Tc = MlaTileT<T, kFmt>;  // the tiles' and P's element type (layout.cuh)
  // The queries are T in global memory but Tc on the tensor cores (convert_queries).
  static constexpr bool kQueriesToHalf = !std::is_same<T, Tc>::value;
  static constexpr int kComputeThreads = kMlaComputeThreads;
  static constexpr int kBarOwn = kMlaBarOwn;
  // The split schedule (kernel.cuh): S reads a tile's groups L, R, rope in both buffers.
  static constexpr bool kSplit = MlaWgRegs<kTma, kFmt>::kSplit;

  const MlaDecodeParams& p;
  unsigned char* base;
  float* sSum;
  int* sBadPage;
  int* sBadWg;
  const unsigned char* sKeyMask;  // the loader's marks of each buffer's key tokens (kSparse)
  uint64_t* full;
  uint64_t* empty;
  int wg, tw, lane;
  int rows_per_b, row0;  // the sequence's s_q x Hq query rows; this block's first of them
  int ld_chunk;          // the 16-byte chunk of a row this thread copies
  uint64_t q_desc;
  float qk_scale;
  float qk_lo, qk_hi;  // qk_scale for rows r_lo and r_hi (differs where the queries were scaled)
  float out_scale;  // kMlaFp8: kv_scale (values are the cache's fp8 values), else 1
  int r_lo, r_hi;  // this thread's two rows in the accumulator layout (the same in both warpgroups)
  float* my_max;          // what this thread publishes
  const float* peer_max;  // what the other warpgroup's twin did
  const T* q_nope;
  const T* q_pe;

  __device__ __forceinline__ MlaComputeWarpgroup(const MlaDecodeParams& params, const MlaWgShared& sh, int wg_,
                                                 int tw_, int lane_, int rows_per_b_, int row0_, int ld_chunk_)
      : p(params), base(sh.base), sSum(sh.sSum), sBadPage(sh.sBadPage), sBadWg(sh.sBadWg), sKeyMask(sh.sKeyMask), full(sh.full),
        empty(sh.empty), wg(wg_), tw(tw_), lane(lane_), rows_per_b(rows_per_b_), row0(row0_), ld_chunk(ld_chunk_) {
    q_desc = wgmma_desc_sw128(smem_addr(base + S::kQ), 16, 1024);
    // kMlaFp8: the tiles hold the fp8 values exactly; kv_scale scales every key and value.
    out_scale = kFmt == kMlaFp8 ? mla_kv_scale(p) : 1.f;
    qk_scale = mla_scale(p) * kLog2e * out_scale;
    qk_lo = qk_hi = qk_scale;
    r_lo = (tw / 32) * 16 + lane / 4;
    r_hi = r_lo + 8;
    my_max = sh.sMax + wg * 256 + 2 * tw;
    peer_max = sh.sMax + (1 - wg) * 256 + 2 * tw;
    q_nope = static_cast<const T*>(p.q_nope);
    q_pe = static_cast<const T*>(p.q_pe);
  }

  __device__ __forceinline__ unsigned char* tile_ptr(int buf) const { return base + S::kTile0 + buf * S::kTileBytes; }
  __device__ __forceinline__ bool tile_bad(int buf) const {
    const int4 f = *reinterpret_cast<const int4*>(sBadPage + buf * 4);
    return (f.x | f.y | f.z | f.w) != 0;
  }
  // This warp is done with column group g of buffer buf (the loader may refill it).
  __device__ __forceinline__ void release(int buf, int g) const {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[buf * kGroups + g]);
  }
  // Issues (does not wait for) S = Q K^T over the column groups of the tile in buffer buf, in the
  // order they are refilled (mla_group_in_order), each once it has landed: 64 x 64 scores, 4 wgmma
  // m64n64k16 per column block. Returns whether a page id of the tile was out of range (known once
  // its first group has landed).
  __device__ __forceinline__ bool issue_scores(float (&sacc)[32], int buf, uint32_t parity) const {
    bool bad = false;
    // Laundered so the compiler derives the 36 operand descriptors here rather than possibly
    // keeping them live across the pair loop (72 registers). Added while chasing spills; ptxas's
    // spill count did not change with it, and the measured kernel has it.
    uint64_t q_d = q_desc, k_desc = wgmma_desc_sw128(smem_addr(tile_ptr(buf)), 16, 1024);
    asm volatile("" : "+l"(q_d), "+l"(k_desc));
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int g = kSplit ? k : mla_group_in_order(buf, k);
      mbar_wait(&full[buf * kGroups + g], parity);
      fence_proxy_async_shared();  // the landed bytes, for wgmma's async-proxy reads
      if (k == 0) bad = tile_bad(buf);
      const int cb_end = g == kGroupRope ? S::kColBlocks : 4 * g + 4;
      if (k == 0) wgmma_fence();
#pragma unroll
      for (int cb = 4 * g; cb < cb_end; ++cb) {
#pragma unroll
        for (int kq = 0; kq < 4; ++kq) {
          const uint32_t off = cb * S::kColBlockBytes + kq * 32;
          wgmma_m64n64k16_ss<Tc>(sacc, wgmma_desc_advance(q_d, off), wgmma_desc_advance(k_desc, off),
                                k > 0 || cb > 4 * g || kq > 0);
        }
      }
    }
    wgmma_commit();
    return bad;
  }
  __device__ __forceinline__ void wait_scores(float (&sacc)[32]) const {
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) reg_fence(sacc[i]);
  }
  // V descriptor of this warpgroup's 256 columns of the tile in buffer buf (MN-major).
  __device__ __forceinline__ uint64_t v_desc(int buf) const {
    return wgmma_desc_sw128(smem_addr(tile_ptr(buf)) + 4 * wg * S::kColBlockBytes, S::kColBlockBytes, 1024);
  }
  // O_half += P V[:, half] with P from registers (A fragments; 4 wgmma m64n256k16).
  __device__ __forceinline__ void pv_from_regs(float (&o)[128], const uint32_t (&pa)[16], int buf) const {
    const uint64_t vd = v_desc(buf);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t a[4] = {pa[4 * kk], pa[4 * kk + 1], pa[4 * kk + 2], pa[4 * kk + 3]};
      wgmma_m64n256k16_rs_tb<Tc>(o, a, wgmma_desc_advance(vd, kk * 16 * 128), 1);
    }
  }
  // O_half += P V[:, half] with P from the tile's rope block, where the other warpgroup put it.
  __device__ __forceinline__ void pv_from_smem(float (&o)[128], int buf) const {
    const uint64_t vd = v_desc(buf);
    const uint64_t pd = wgmma_desc_sw128(smem_addr(tile_ptr(buf) + S::kRopeBlock), 16, 1024);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      wgmma_m64n256k16_ss_tb<Tc>(o, wgmma_desc_advance(pd, kk * 32), wgmma_desc_advance(vd, kk * 16 * 128), 1);
    }
  }
  // Scales S to the log2 domain, with masked keys at -inf when `mask` (only tiles that reach past
  // a row's last visible key need it); returns the rows' maxima over the tile (in buffer buf).
  // kSparse: a key is masked when the loader marked its token as none (past the list's length,
  // or a slot outside the pool), whatever `mask` says.
  __device__ __forceinline__ MlaRowPair tile_max(float (&sacc)[32], int u, bool mask, int end_lo, int end_hi,
                                                 int buf) const {
    // Accumulator j of this thread: key 8 (j / 4) + 2 (lane % 4) + j % 2 of the tile, row r_lo
    // for j % 4 < 2, else r_hi. Keys are compared as offsets in the tile.
    const int tile0 = u * kMlaWgKeys + 2 * (lane % 4);
    const int lim_lo = max(-1, min(end_lo - tile0, kMlaWgKeys));
    const int lim_hi = max(-1, min(end_hi - tile0, kMlaWgKeys));
    // kSparse: the marks of this thread's tokens 8 q + 2 (lane % 4) + {0, 1} (q = j / 4), read as
    // needed (registers are scarce here: marks held through the loop made ptxas spill).
    const unsigned char* marks = sKeyMask + buf * 64 + 2 * (lane % 4);
    MlaRowPair mx{-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int key = 8 * (j / 4) + (j % 2);
      const bool hi = (j % 4) >= 2;
      const bool keep = kSparse ? marks[8 * (j / 4) + j % 2] != 0
                                : !mask || key < (hi ? lim_hi : lim_lo);
      sacc[j] = keep ? sacc[j] * (hi ? qk_hi : qk_lo) : -INFINITY;
      if (hi) mx.hi = fmaxf(mx.hi, sacc[j]);
      else mx.lo = fmaxf(mx.lo, sacc[j]);
    }
#pragma unroll
    for (int off = 1; off <= 2; off *= 2) {  // the 4 threads of a quad hold one row
      mx.lo = fmaxf(mx.lo, gpu::shfl_xor(mx.lo, off));
      mx.hi = fmaxf(mx.hi, gpu::shfl_xor(mx.hi, off));
    }
    return mx;
  }
  // P = exp2(S - m) as 16-bit wgmma A fragments; returns the rows' sums (this thread's share).
  __device__ __forceinline__ MlaRowPair probabilities(float (&sacc)[32], MlaRowPair m, uint32_t (&pa)[16]) const {
    const float base_lo = m.lo == -INFINITY ? 0.f : m.lo, base_hi = m.hi == -INFINITY ? 0.f : m.hi;
    MlaRowPair sum{0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 32; ++j) {  // exp2(-inf) = 0 for masked keys
      const bool hi = (j % 4) >= 2;
      sacc[j] = fast_exp2(sacc[j] - (hi ? base_hi : base_lo));
      if (hi) sum.hi += sacc[j];
      else sum.lo += sacc[j];
    }
    // Accumulator layout -> A layout: keys 16 kk .. 16 kk + 15 are accumulator groups 2 kk, 2 kk + 1.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int i = 0; i < 4; ++i) pa[4 * kk + i] = pack2<Tc>(sacc[8 * kk + 2 * i], sacc[8 * kk + 2 * i + 1]);
    }
    return sum;
  }
  // Stores A fragments of P into the tile's rope block as a 64 x 64 K-major swizzled matrix (the
  // A operand of pv_from_smem) and makes them visible to the other warpgroup's wgmma.
  // Fragment 4 kk + i holds keys 16 kk + 8 (i / 2) + 2 (lane % 4) + {0, 1} of row r_lo (i even)
  // or r_hi (i odd); a warp's stores cover 8 rows x 16 bytes, one per bank.
  __device__ __forceinline__ void store_p(int buf, const uint32_t (&pa)[16]) const {
    unsigned char* block = tile_ptr(buf) + S::kRopeBlock;
#pragma unroll
    for (int f = 0; f < 16; ++f) {
      const int r = (f % 2) ? r_hi : r_lo, chunk = 2 * (f / 4) + (f % 4) / 2;
      *reinterpret_cast<uint32_t*>(block + sw128_offset(r, chunk) + (lane % 4) * 4) = pa[f];
    }
    fence_proxy_async_shared();
  }
  static __device__ __forceinline__ MlaRowPair max_of(MlaRowPair a, MlaRowPair b) { return MlaRowPair{fmaxf(a.lo, b.lo), fmaxf(a.hi, b.hi)}; }
  // exp2(from - to) per row for running maxima moving from `from` to `to` (>= from); 1 while -inf.
  static __device__ __forceinline__ MlaRowPair rescale(MlaRowPair from, MlaRowPair to) {
    auto f = [](float a, float b) { return b == -INFINITY ? 1.f : fast_exp2(a - b); };
    return MlaRowPair{f(from.lo, to.lo), f(from.hi, to.hi)};
  }
  // This thread's rows' maxima, for its twin in the other warpgroup (which waits on barrier `bar`).
  __device__ __forceinline__ void publish_max(MlaRowPair mm, int bar) const {
    my_max[0] = mm.lo;
    my_max[1] = mm.hi;
    named_barrier_arrive(bar, kComputeThreads);
  }
  __device__ __forceinline__ void scale_o(float (&o)[128], MlaRowPair c) const {
    if (gpu::any(c.lo != 1.f || c.hi != 1.f)) {
#pragma unroll
      for (int j = 0; j < 128; ++j) o[j] *= (j % 4) < 2 ? c.lo : c.hi;
    }
  }
  // A TMA tile is whole pages, so in a sequence's last tile the rows past kv_len hold whatever
  // the page holds there (maybe NaN, and 0 * NaN is NaN): this warpgroup zeroes those rows of its
  // V half before its product reads them. (Their scores are masked by value, so K may keep them;
  // cp.async tiles are zero-filled already.) Only the warpgroup itself reads its half as V.
  __device__ __forceinline__ void zero_v_tail(int buf, int tile, int kv_len) const {
    if constexpr (kTma) {
      const int first = kv_len - tile * kMlaWgKeys;  // >= 1: the tile starts before kv_len
      if (first >= kMlaWgKeys) return;
      unsigned char* half = tile_ptr(buf) + 4 * wg * S::kColBlockBytes;
      for (int c = tw; c < (kMlaWgKeys - first) * 32; c += 128) {  // (row, column block, 16 bytes)
        const int row = first + c / 32, cb = (c / 8) % 4, chunk = c % 8;
        *reinterpret_cast<int4*>(half + cb * S::kColBlockBytes + row * 128 + chunk * 16) = make_int4(0, 0, 0, 0);
      }
      fence_proxy_async_shared();
      named_barrier_sync(kBarOwn + wg, 128);
    }
  }
  __device__ __forceinline__ void settle_o(float (&o)[128]) const {
#pragma unroll
    for (int i = 0; i < 128; ++i) reg_fence(o[i]);
  }

  // kQueriesToHalf: rewrites the sequence's landed query rows (T = bf16) in shared memory as half,
  // row r times 2^k_r with k_r putting the row's largest finite |q| in [2^14, 2^15), so every bf16
  // value of the row down to 2^-32 of that largest is exact in half (smaller ones round at 2^-40
  // of it); S of row r then comes out 2^k_r too large, and qk_lo / qk_hi take 2^-k_r. A row of
  // zeros, or whose largest |q| is inf, keeps k_r = 0 (NaN stays NaN, inf inf). Both compute
  // warpgroups: each thread converts chunk wg * 4 + lane % 4 of the nine column blocks of its rows
  // r_lo and r_hi; the maxima meet through the quads' shuffles and sMax. The caller fences and
  // meets the other warpgroup before the tiles' products read the queries.
  __device__ __forceinline__ void convert_queries() {
    if constexpr (kQueriesToHalf) {
      // This thread's chunk of column block cb of row r_lo (h = 0) or r_hi.
      auto chunk = [&](int h, int cb) {
        return reinterpret_cast<uint4*>(base + S::kQ + cb * S::kColBlockBytes + sw128_offset(h ? r_hi : r_lo, wg * 4 + lane % 4));
      };
      float mx[2] = {0.f, 0.f};
      // (the column blocks in rolled loops: this runs once a sequence, its code fetched cold, and
      // unrolled the two passes were ~11 KB; see epilogue.cuh. With h outside, ptxas keeps the
      // pair loop's registers as unrolled; with cb outside it recomputed store_p's addresses there.)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll 1
        for (int cb = 0; cb < S::kColBlocks; ++cb) {
          const uint4 v = *chunk(h, cb);
          const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {  // (fmaxf drops NaN: a NaN value does not set the scale)
            const float2 x = bf16x2_to_float2(w4[i]);
            mx[h] = fmaxf(mx[h], fmaxf(fabsf(x.x), fabsf(x.y)));
          }
        }
#pragma unroll
        for (int off = 1; off <= 2; off *= 2) mx[h] = fmaxf(mx[h], gpu::shfl_xor(mx[h], off));
      }
      my_max[0] = mx[0];
      my_max[1] = mx[1];
      named_barrier_sync(kMlaBarCompute, kComputeThreads);
      float f[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m = fmaxf(mx[h], peer_max[h]);
        int k = 0;
        if (m > 0.f && m != INFINITY) k = f16_query_exponent(int((__float_as_uint(m) >> 23) & 0xFFu));
        f[h] = exp2_of(k);
        const float inv = exp2_of(-k);
        if (h) qk_hi = qk_scale * inv;
        else qk_lo = qk_scale * inv;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll 1
        for (int cb = 0; cb < S::kColBlocks; ++cb) {
          uint4* at = chunk(h, cb);
          const uint4 v = *at;
          const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
          uint32_t o4[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float2 x = bf16x2_to_float2(w4[i]);
            o4[i] = pack2<gpu_half>(x.x * f[h], x.y * f[h]);
          }
          *at = make_uint4(o4[0], o4[1], o4[2], o4[3]);
        }
      }
    }
  }

  // Copies the 64 query rows of sequence b into shared memory with `threads` threads (rows past
  // the sequence's s_q x Hq read as 0); the caller waits for its cp.async group.
  __device__ __forceinline__ void load_queries(int b, int t, int threads) const {
    const int rows_per_pass = threads / 8;
    for (int r = t / 8; r < kMlaWgRows; r += rows_per_pass) {
      const bool live = row0 + r < rows_per_b;
      const int64_t g = int64_t(b) * rows_per_b + (live ? row0 + r : 0);
      unsigned char* dst = base + S::kQ + sw128_offset(r, ld_chunk);
      copy_row_chunk(dst, S::kColBlockBytes, q_nope + g * kMlaLatentDim + ld_chunk * 8,
                     q_pe + g * kMlaRopeDim + ld_chunk * 8, live);
    }
    cp_async_commit();
  }

  // The compute warpgroups meet (kAny: from different code - the split schedule's two roles - at
  // the non-.aligned barrier, which synccheck requires there).
  template <bool kAny>
  __device__ __forceinline__ static void meet() {
    if constexpr (kAny) named_barrier_sync_any(kMlaBarCompute, kMlaComputeThreads);
    else named_barrier_sync(kMlaBarCompute, kMlaComputeThreads);
  }

  // A sequence's start: both warpgroups are done with the previous sequence's queries (and, in
  // the seesaw schedule, its crossing buffers); then sequence b's queries have landed for both -
  // loaded here by both, unless warpgroup 0 issued them behind the previous epilogue (in_flight).
  // (The gathering loaders' kernels; with TMA the loader thread loads them: kernel.cuh.)
  template <bool kAny>
  __device__ __forceinline__ void land_queries(int b, int t, bool in_flight) const {
    meet<kAny>();
    if (!in_flight) load_queries(b, t, kMlaComputeThreads);
    cp_async_wait<0>();
    fence_proxy_async_shared();
    meet<kAny>();
  }
};
#endif

}  // namespace jaxpaged
