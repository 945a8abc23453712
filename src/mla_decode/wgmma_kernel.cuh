// MLA decode on Hopper warpgroup tensor cores (wgmma; built for sm_90a only).
//
// Block = 64 query rows (of one sequence's s_q x Hq) x one partition of the KV work
// (partition_schedule.cuh); 256 threads = two warpgroups. The rows' queries (512 latent + 64 rope)
// stay in shared memory; the partition's keys stream through in 32-token tiles (576 wide) in a
// ring of four stages loaded by cp.async from all threads, so three tiles are in flight while one
// is computed. Tiles are stored with the 128-byte swizzle, so each is at once the K operand
// (K-major) of S = Q K^T and the V operand (MN-major, its first 512 columns) of O = P V.
// Per tile:
//   warpgroup 0: S = Q K^T (64 x 32, 36 wgmma m64n32k16 from shared memory), online softmax in
//                registers (log2 domain), P rounded to 16 bits as register A fragments; P and the
//                rows' rescale factors go to shared memory for warpgroup 1 (named barrier 1);
//   both:        O_half = O_half * corr + P V[:, half] (2 wgmma m64n256k16, A = P from registers);
//                warpgroup 0 owns output columns 0-255, warpgroup 1 columns 256-511 (128 float
//                accumulators per thread each: the whole 64 x 512 O lives in registers).
// Tile size: shared memory (Q 72 KiB + 144 KiB of stages) holds two 64-token stages or four
// 32-token ones. 32-token tiles were chosen to keep three tiles in flight, but measured alone they
// were slower than 64-token tiles with two stages (0.293 vs 0.267 ms on mla_h128_b64_ctx4k: S with
// N = 32 re-reads Q from shared memory twice as often); the later fixes were measured only with 32.
// Which size wins now is open (NOTES.md items 10-12).
// Rows past the sequence's s_q x Hq, keys past kv_len or past a causal row's last key get
// probability 0; their K/V bytes are zero-filled (0 * garbage must not reach a product).
#pragma once

#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "common/mma_sm80.cuh"
#include "common/wgmma_sm90.cuh"
#include "mla_decode/params.h"
#include "mla_decode/partition_schedule.cuh"

namespace jaxpaged {

constexpr int kMlaWgThreads = 256;
constexpr int kMlaWgRows = 64;  // query rows per block: the wgmma M
constexpr int kMlaWgKeys = 32;  // cache tokens per computed tile (the schedule counts 64-token tiles)
constexpr int kMlaWgStages = 4;

// Shared memory, byte offsets from a 1024-aligned base (the swizzle atoms must be 1024-aligned).
struct MlaWgSmem {
  static constexpr int kWidth = kMlaLatentDim + kMlaRopeDim;  // 576
  static constexpr int kColBlocks = kWidth / 64;              // 9 column blocks of 128 bytes
  static constexpr int kQColBlockBytes = kMlaWgRows * 128;    // 8 KiB
  static constexpr int kKvColBlockBytes = kMlaWgKeys * 128;   // 4 KiB
  static constexpr int kStageBytes = kColBlocks * kKvColBlockBytes;
  static constexpr int kQ = 0;
  static constexpr int kStage0 = kColBlocks * kQColBlockBytes;
  static constexpr int kP = kStage0 + kMlaWgStages * kStageBytes;  // 2 x 128 x 16 bytes
  static constexpr int kCorr = kP + 2 * 128 * 16;                  // 128 threads x 2 floats
  static constexpr int kBadSeq = kCorr + 128 * 2 * 4;              // int
  static constexpr size_t kAllocBytes = size_t(kBadSeq) + 16 + 1024;  // + room to align the base
};

template <typename T>
__global__ void __launch_bounds__(kMlaWgThreads, 1)
    mla_wgmma_kernel(const MlaDecodeParams p, int page_shift, int row_blocks, const MlaSchedule s,
                     float* __restrict__ ws_out, float* __restrict__ ws_lse) {
#if defined(JP_HAVE_WGMMA)
  using S = MlaWgSmem;
  extern __shared__ unsigned char smem_raw[];
  // Offset from smem_raw (not an integer cast) so the compiler still knows these are shared addresses.
  unsigned char* base = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint4* sP = reinterpret_cast<uint4*>(base + S::kP);
  float* sCorr = reinterpret_cast<float*>(base + S::kCorr);
  int* bad_seq = reinterpret_cast<int*>(base + S::kBadSeq);
  const uint32_t stage_addr0 = smem_addr(base + S::kStage0);
  const uint64_t q_desc = wgmma_desc_sw128(smem_addr(base + S::kQ), 16, 1024);

  const int tid = threadIdx.x, wg = tid / 128, tw = tid % 128, lane = tid % 32;
  const int part = blockIdx.x / row_blocks, rb = blockIdx.x % row_blocks;
  const int first_b = s.part_first[part], last_b = s.part_last[part];
  const int64_t rows_per_b = p.s_q * p.num_heads;
  const int64_t row0 = int64_t(rb) * kMlaWgRows;
  const int64_t capacity = p.max_pages * p.page_size;
  const float qk_scale = p.scale * kLog2e;
  // This thread's two rows in the accumulator layout (the same in both warpgroups).
  const int r_lo = (tw / 32) * 16 + lane / 4, r_hi = r_lo + 8;
  // Loader roles: 16-byte chunk ld_chunk of every column block of a row. Queries: all threads,
  // rows tid / 8 and tid / 8 + 32. K/V tiles: warpgroup 1 only (it would otherwise wait for P
  // while warpgroup 0 computes S), tokens kv_row and kv_row + 16. Eight consecutive threads fill
  // one 128-byte row: global reads coalesce and the swizzled stores hit eight bank groups.
  const int ld_chunk = tid % 8, ld_row = tid / 8, kv_row = tw / 8;
  const int ld_swz = ((ld_chunk ^ (ld_row % 8)) * 16);  // byte offset of the chunk within its row
  constexpr int kKvRowsPerThread = kMlaWgKeys / 16;

  const T* q_nope = static_cast<const T*>(p.q_nope);
  const T* q_pe = static_cast<const T*>(p.q_pe);
  const T* ckv = static_cast<const T*>(p.ckv);
  const T* kpe = static_cast<const T*>(p.kpe);
  if (tid == 0) *bad_seq = -1;

  for (int b = first_b; b <= last_b; ++b) {
    const int64_t kv_len = clamp_kv_len(p.kv_lens[b], capacity);
    const TileSpan span = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
    constexpr int kPerSpanTile = kMlaTileKeys / kMlaWgKeys;
    const int u_begin = span.begin * kPerSpanTile;
    const int u_end = min(span.end * kPerSpanTile, int((kv_len + kMlaWgKeys - 1) / kMlaWgKeys));
    const int32_t* table = p.block_tables + int64_t(b) * p.max_pages;
    __syncthreads();  // the previous sequence is done with Q, the stages and sCorr

#pragma unroll
    for (int half = 0; half < 2; ++half) {  // queries; rows past the sequence's s_q x Hq read as 0
      const int r = ld_row + 32 * half;
      const bool live = row0 + r < rows_per_b;
      const int64_t g = int64_t(b) * rows_per_b + (live ? row0 + r : 0);
      unsigned char* dst = base + S::kQ + r * 128 + ld_swz;
#pragma unroll
      for (int cb = 0; cb < S::kColBlocks; ++cb) {
        const T* src = cb < 8 ? q_nope + g * kMlaLatentDim + cb * 64 + ld_chunk * 8
                              : q_pe + g * kMlaRopeDim + ld_chunk * 8;
        cp_async_16(dst + cb * S::kQColBlockBytes, src, live);
      }
    }
    // The page-table entries of a tile's tokens for this thread (warpgroup 1), read a tile ahead
    // of their use so the table's latency is off the path from one tile to the next.
    struct Entries {
      int32_t e[kKvRowsPerThread];
    };
    auto table_entries = [&](int tile) {
      Entries en;
#pragma unroll
      for (int h = 0; h < kKvRowsPerThread; ++h) {
        const int64_t j = int64_t(tile) * kMlaWgKeys + kv_row + 16 * h;
        en.e[h] = j < kv_len ? table[j >> page_shift] : 0;
      }
      return en;
    };
    auto load_tile = [&](int tile, int stage, const Entries& en) {
#pragma unroll
      for (int h = 0; h < kKvRowsPerThread; ++h) {
        const int r = kv_row + 16 * h;
        unsigned char* dst = base + S::kStage0 + stage * S::kStageBytes + r * 128 + ((ld_chunk ^ (r % 8)) * 16);
        const int64_t j = int64_t(tile) * kMlaWgKeys + r;
        bool valid = j < kv_len;
        if (valid && (en.e[h] < 0 || en.e[h] >= p.num_pages)) {
          valid = false;
          *bad_seq = b;
        }
        const int64_t page = valid ? en.e[h] : 0;
        const int64_t slot = j & (p.page_size - 1);
        const T* ckv_row = ckv + page * p.ckv_page_stride + slot * p.ckv_slot_stride + ld_chunk * 8;
        const T* kpe_row = kpe + page * p.kpe_page_stride + slot * p.kpe_slot_stride + ld_chunk * 8;
#pragma unroll
        for (int cb = 0; cb < S::kColBlocks; ++cb) {
          const T* src = !valid ? ckv : (cb < 8 ? ckv_row + cb * 64 : kpe_row);
          cp_async_16(dst + cb * S::kKvColBlockBytes, src, valid);
        }
      }
    };
    // Prologue: queries (all threads) and the first three tiles (warpgroup 1), one commit group
    // per tile (the queries ride with the first), so for warpgroup 1 "all but the two newest
    // groups landed" means "the current tile landed".
#pragma unroll
    for (int k = 0; k < kMlaWgStages - 1; ++k) {
      if (wg == 1 && u_begin + k < u_end) load_tile(u_begin + k, k, table_entries(u_begin + k));
      cp_async_commit();
    }
    Entries entries_next{};
    if (wg == 1 && u_begin + kMlaWgStages - 1 < u_end) entries_next = table_entries(u_begin + kMlaWgStages - 1);

    // Each row's visible keys end at row_end (causal rows see fewer); dead rows see none.
    auto row_end = [&](int r) -> int64_t {
      if (row0 + r >= rows_per_b) return 0;
      return p.causal ? visible_keys(kv_len, p.s_q, (row0 + r) / p.num_heads, 0).end : kv_len;
    };
    const int64_t end_lo = row_end(r_lo), end_hi = row_end(r_hi);
    float m_lo = -INFINITY, m_hi = -INFINITY;  // running max (log2 domain), warpgroup 0
    float l_lo = 0.f, l_hi = 0.f;              // this thread's share of the running sum
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;

    for (int u = u_begin; u < u_end; ++u) {
      const int stage = (u - u_begin) % kMlaWgStages;
      // This thread's copies of tile u (warpgroup 1) and of Q (both) have landed and are made
      // visible to wgmma (async proxy); after the barrier, everyone's have, and everyone is done
      // with tile u - 1, whose stage the next load reuses.
      if (wg == 1) cp_async_wait<kMlaWgStages - 2>();
      else cp_async_wait<0>();
      fence_proxy_async_shared();
      __syncthreads();
      if (wg == 1) {
        if (u + kMlaWgStages - 1 < u_end) {
          load_tile(u + kMlaWgStages - 1, (stage + kMlaWgStages - 1) % kMlaWgStages, entries_next);
        }
        cp_async_commit();
        if (u + kMlaWgStages < u_end) entries_next = table_entries(u + kMlaWgStages);
      }
      const uint32_t kv_addr = stage_addr0 + stage * S::kStageBytes;

      uint32_t pa[8];  // P as wgmma A fragments: 2 k-steps (16 keys) x 4 registers
      float corr_lo, corr_hi;
      if (wg == 0) {
        float sacc[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) sacc[i] = 0.f;
        const uint64_t k_desc = wgmma_desc_sw128(kv_addr, 16, 1024);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < S::kWidth / 16; ++ks) {
          wgmma_m64n32k16_ss<T>(sacc, wgmma_desc_advance(q_desc, (ks / 4) * S::kQColBlockBytes + (ks % 4) * 32),
                                wgmma_desc_advance(k_desc, (ks / 4) * S::kKvColBlockBytes + (ks % 4) * 32),
                                ks > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < 16; ++i) reg_fence(sacc[i]);

        // Online softmax. Accumulator j of this thread: key 8 (j / 4) + 2 (lane % 4) + j % 2 of
        // the tile, row r_lo for j % 4 < 2, else r_hi. Keys are compared as offsets in the tile.
        const int64_t tile0 = int64_t(u) * kMlaWgKeys + 2 * (lane % 4);
        const int lim_lo = int(max(int64_t(-1), min(end_lo - tile0, int64_t(kMlaWgKeys))));
        const int lim_hi = int(max(int64_t(-1), min(end_hi - tile0, int64_t(kMlaWgKeys))));
        float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const int key = 8 * (j / 4) + (j % 2);
          const bool hi = (j % 4) >= 2;
          sacc[j] = key < (hi ? lim_hi : lim_lo) ? sacc[j] * qk_scale : -INFINITY;
          if (hi) mx_hi = fmaxf(mx_hi, sacc[j]);
          else mx_lo = fmaxf(mx_lo, sacc[j]);
        }
#pragma unroll
        for (int off = 1; off <= 2; off *= 2) {  // the 4 threads of a quad hold one row
          mx_lo = fmaxf(mx_lo, JP_SHFL_XOR(mx_lo, off));
          mx_hi = fmaxf(mx_hi, JP_SHFL_XOR(mx_hi, off));
        }
        const float new_lo = fmaxf(m_lo, mx_lo), new_hi = fmaxf(m_hi, mx_hi);
        corr_lo = new_lo == -INFINITY ? 1.f : fast_exp2(m_lo - new_lo);
        corr_hi = new_hi == -INFINITY ? 1.f : fast_exp2(m_hi - new_hi);
        m_lo = new_lo;
        m_hi = new_hi;
        const float base_lo = m_lo == -INFINITY ? 0.f : m_lo, base_hi = m_hi == -INFINITY ? 0.f : m_hi;
        float sum_lo = 0.f, sum_hi = 0.f;
#pragma unroll
        for (int j = 0; j < 16; ++j) {  // exp2(-inf) = 0 for masked keys
          const bool hi = (j % 4) >= 2;
          sacc[j] = fast_exp2(sacc[j] - (hi ? base_hi : base_lo));
          if (hi) sum_hi += sacc[j];
          else sum_lo += sacc[j];
        }
        l_lo = l_lo * corr_lo + sum_lo;
        l_hi = l_hi * corr_hi + sum_hi;
        // Accumulator layout -> A layout: keys 16 kk .. 16 kk + 15 are accumulator groups 2 kk, 2 kk + 1.
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          pa[4 * kk + 0] = pack2<T>(sacc[8 * kk + 0], sacc[8 * kk + 1]);
          pa[4 * kk + 1] = pack2<T>(sacc[8 * kk + 2], sacc[8 * kk + 3]);
          pa[4 * kk + 2] = pack2<T>(sacc[8 * kk + 4], sacc[8 * kk + 5]);
          pa[4 * kk + 3] = pack2<T>(sacc[8 * kk + 6], sacc[8 * kk + 7]);
        }
        // Hand P and the rescale factors to warpgroup 1's thread of the same rank (same rows and
        // keys); interleaved by thread so the 16-byte stores are conflict-free.
#pragma unroll
        for (int q = 0; q < 2; ++q) sP[q * 128 + tw] = make_uint4(pa[4 * q], pa[4 * q + 1], pa[4 * q + 2], pa[4 * q + 3]);
        sCorr[2 * tw] = corr_lo;
        sCorr[2 * tw + 1] = corr_hi;
        named_barrier_arrive(1, kMlaWgThreads);
      } else {
        named_barrier_sync(1, kMlaWgThreads);
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const uint4 v = sP[q * 128 + tw];
          pa[4 * q] = v.x;
          pa[4 * q + 1] = v.y;
          pa[4 * q + 2] = v.z;
          pa[4 * q + 3] = v.w;
        }
        corr_lo = sCorr[2 * tw];
        corr_hi = sCorr[2 * tw + 1];
      }

      // O = O * corr + P V for this warpgroup's 256 columns (column blocks 4 wg .. 4 wg + 3). Once
      // the running maxima settle, corr is 1 for every row of a warp and the rescale is skipped.
      if (__any_sync(0xffffffffu, corr_lo != 1.f || corr_hi != 1.f)) {
#pragma unroll
        for (int j = 0; j < 128; ++j) o[j] *= (j % 4) < 2 ? corr_lo : corr_hi;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) reg_fence(pa[i]);
      const uint64_t v_desc = wgmma_desc_sw128(kv_addr + 4 * wg * S::kKvColBlockBytes, S::kKvColBlockBytes, 1024);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const uint32_t a[4] = {pa[4 * kk], pa[4 * kk + 1], pa[4 * kk + 2], pa[4 * kk + 3]};
        wgmma_m64n256k16_rs_tb<T>(o, a, wgmma_desc_advance(v_desc, kk * 16 * 128), 1);
      }
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < 128; ++i) reg_fence(o[i]);
    }
    cp_async_wait<0>();
    // Epilogue: warpgroup 0 completes the row sums and hands 1 / l to warpgroup 1.
    __syncthreads();  // warpgroup 1 has read the last tile's factors; corrupt-page flags are set
    float lse_lo = -INFINITY, lse_hi = -INFINITY;
    if (wg == 0) {
#pragma unroll
      for (int off = 1; off <= 2; off *= 2) {
        l_lo += JP_SHFL_XOR(l_lo, off);
        l_hi += JP_SHFL_XOR(l_hi, off);
      }
      if (l_lo > 0.f) lse_lo = (m_lo + __log2f(l_lo)) * kLn2;
      if (l_hi > 0.f) lse_hi = (m_hi + __log2f(l_hi)) * kLn2;
      sCorr[2 * tw] = l_lo > 0.f ? 1.f / l_lo : 0.f;
      sCorr[2 * tw + 1] = l_hi > 0.f ? 1.f / l_hi : 0.f;
    }
    __syncthreads();
    const float inv_lo = sCorr[2 * tw], inv_hi = sCorr[2 * tw + 1];
    const bool bad = *bad_seq == b;
    const bool whole = s.seq_pieces[b] == 1;
    const int slot = whole ? 0 : mla_piece_slot(s, part, b);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = half ? r_hi : r_lo;
      if (row0 + r >= rows_per_b) continue;
      const float inv = half ? inv_hi : inv_lo;
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
        const float lse = bad ? NAN : (half ? lse_hi : lse_lo);
        if (whole) p.lse[row] = lse;
        else ws_lse[ws_row] = lse;
      }
    }
  }
#endif
}

}  // namespace jaxpaged
