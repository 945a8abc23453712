// MLA decode on tensor cores (mma.sync m16n8k16; sm_80 and sm_90).
//
// Block = (batch row b, 16*MT query rows of its s_q x Hq, KV split), 8 warps. The block's queries
// (latent 512 + rope 64 = 576 wide) stay in shared memory; the sequence's cache rows stream
// through in tiles of 32 tokens, double-buffered with cp.async. Per tile:
//   S = Q K^T     [rows x 32] over k = 576, tensor cores, into shared memory;
//   softmax       online (running max/sum per row, log2 domain), P rounded to 16 bits;
//   O = O*c + P V [rows x 512], V = the tile's first 512 columns (the latent doubles as value),
//                 read through ldmatrix.trans; each warp owns a (16 rows x 512/(8/MT)) slice of O.
// Masked or out-of-range tokens are zero-filled in shared memory and get probability 0.
// Speed notes (next issue): one block per SM (shared memory), three barriers per tile, no wgmma.
#pragma once

#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "common/sm80/mma.cuh"
#include "mla_decode/params.h"
#include "mla_decode/workspace.h"  // mla_row_tiles

namespace jaxpaged {

constexpr int kMlaThreads = 256;

template <int MT>
struct MlaLayout {
  static constexpr int kRows = 16 * MT;  // query rows per block
  static constexpr int kKeys = 32;       // cache tokens per tile
  static constexpr int kWidth = kMlaLatentDim + kMlaRopeDim;
  static constexpr int kChunks = kWidth / 8;  // 16-byte chunks per row
  // Row strides padded so that 8 consecutive rows start in different 16-byte bank groups
  // (1168 B = 73 x 16 B and 80 B = 5 x 16 B: odd multiples), keeping ldmatrix conflict-free.
  static constexpr int kStride = kWidth + 8;
  static constexpr int kSStride = kKeys + 1;  // floats
  static constexpr int kPStride = kKeys + 8;  // 16-bit elements
  static constexpr size_t kSmemBytes = size_t(kRows) * kStride * 2 + 2 * size_t(kKeys) * kStride * 2 +
                                       size_t(kRows) * kSStride * 4 + size_t(kRows) * kPStride * 2 +
                                       3 * size_t(kRows) * 4 + 16;
};

template <typename T, int MT>
__global__ void __launch_bounds__(kMlaThreads, 1)
    mla_decode_kernel(const MlaDecodeParams p, int page_shift, float* __restrict__ ws_out,
                      float* __restrict__ ws_lse) {
  using L = MlaLayout<MT>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sKV = sQ + L::kRows * L::kStride;  // two stages of [kKeys][kStride]
  float* sS = reinterpret_cast<float*>(sKV + 2 * L::kKeys * L::kStride);
  T* sP = reinterpret_cast<T*>(sS + L::kRows * L::kSStride);
  float* sM = reinterpret_cast<float*>(sP + L::kRows * L::kPStride);
  float* sL = sM + L::kRows;
  float* sCorr = sL + L::kRows;
  int* sBad = reinterpret_cast<int*>(sCorr + L::kRows);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t b = blockIdx.x;
  const int split = blockIdx.z, num_splits = gridDim.z;
  const int64_t rows_per_b = p.s_q * p.num_heads;
  const int64_t row0 = int64_t(blockIdx.y) * L::kRows;

  const int64_t kv_len = clamp_kv_len(p.kv_lens[b], p.max_pages * p.page_size);
  const int64_t per_split = (kv_len + num_splits - 1) / num_splits;
  const int64_t chunk = (per_split + L::kKeys - 1) / L::kKeys * L::kKeys;  // whole tiles per split
  const int64_t k_begin = split * chunk;
  const int64_t k_end = min(kv_len, k_begin + chunk);
  const int num_tiles = k_end > k_begin ? int((k_end - k_begin + L::kKeys - 1) / L::kKeys) : 0;

  if (tid < L::kRows) {
    sM[tid] = -INFINITY;
    sL[tid] = 0.f;
  }
  if (tid == 0) *sBad = 0;
  __syncthreads();

  // Queries: latent then rope, one 576-wide row each; rows past the batch row's end read as 0.
  const T* q_nope = static_cast<const T*>(p.q_nope);
  const T* q_pe = static_cast<const T*>(p.q_pe);
  for (int c = tid; c < L::kRows * L::kChunks; c += kMlaThreads) {
    const int r = c / L::kChunks, ch = c % L::kChunks;
    const bool live = row0 + r < rows_per_b;
    const int64_t g = b * rows_per_b + (live ? row0 + r : 0);
    const T* src = ch < 64 ? q_nope + g * kMlaLatentDim + ch * 8 : q_pe + g * kMlaRopeDim + (ch - 64) * 8;
    cp_async_16(sQ + r * L::kStride + ch * 8, src, live);
  }

  const T* ckv = static_cast<const T*>(p.ckv);
  const T* kpe = static_cast<const T*>(p.kpe);
  const int32_t* table = p.block_tables + b * p.max_pages;
  const int64_t page_mask = p.page_size - 1;
  auto load_tile = [&](int tile, int stage) {
    T* dst = sKV + stage * L::kKeys * L::kStride;
    const int64_t start = k_begin + int64_t(tile) * L::kKeys;
    for (int c = tid; c < L::kKeys * L::kChunks; c += kMlaThreads) {
      const int key = c / L::kChunks, ch = c % L::kChunks;
      const int64_t j = start + key;
      bool valid = j < k_end;
      const T* src = ckv;
      if (valid) {
        const int64_t page = table[j >> page_shift];
        if (page < 0 || page >= p.num_pages) {
          valid = false;
          *sBad = 1;
        } else {
          const int64_t slot = j & page_mask;
          src = ch < 64 ? ckv + page * p.ckv_page_stride + slot * p.ckv_slot_stride + ch * 8
                        : kpe + page * p.kpe_page_stride + slot * p.kpe_slot_stride + (ch - 64) * 8;
        }
      }
      cp_async_16(dst + key * L::kStride + ch * 8, src, valid);
    }
  };
  if (num_tiles > 0) load_tile(0, 0);
  cp_async_commit();  // group 0: queries and tile 0

  // Softmax roles: TPR threads per query row, KPT tokens each.
  constexpr int TPR = kMlaThreads / L::kRows;
  constexpr int KPT = L::kKeys / TPR;
  const int sm_row = tid / TPR, sm_part = tid % TPR;
  int64_t row_end = 0;  // the row's visible tokens are [0, row_end)
  if (row0 + sm_row < rows_per_b) {
    const int64_t i = (row0 + sm_row) / p.num_heads;
    row_end = p.causal ? visible_keys(kv_len, p.s_q, i, 0).end : kv_len;
  }
  const float qk_scale = mla_scale(p) * kLog2e;

  // S roles: MT row tiles x 4 token groups of 8; with MT = 4 each warp takes two adjacent groups.
  constexpr int S_NT = MT == 4 ? 2 : 1;
  constexpr int S_TASKS_PER_RT = 4 / S_NT;
  const bool s_active = warp < MT * S_TASKS_PER_RT;
  const int s_rt = warp / S_TASKS_PER_RT, s_nt0 = (warp % S_TASKS_PER_RT) * S_NT;

  // O roles: each warp owns one row tile and 512/DSPLIT output columns.
  constexpr int DSPLIT = 8 / MT;
  constexpr int NT = 64 / DSPLIT;  // 8-column tiles per warp
  const int o_rt = warp / DSPLIT;
  const int o_d0 = (warp % DSPLIT) * (kMlaLatentDim / DSPLIT);
  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;

  for (int t = 0; t < num_tiles; ++t) {
    const int stage = t & 1;
    if (t + 1 < num_tiles) load_tile(t + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the tile just issued has landed
    __syncthreads();
    const T* kv = sKV + stage * L::kKeys * L::kStride;

    if (s_active) {
      float s[S_NT][4] = {};
#pragma unroll 2
      for (int ks = 0; ks < L::kWidth / 16; ks += 2) {
        uint32_t a0[4], a1[4];
        const T* qrow = sQ + (s_rt * 16 + (lane & 15)) * L::kStride + (lane >> 4) * 8;
        ldmatrix_x4(a0, qrow + ks * 16);
        ldmatrix_x4(a1, qrow + (ks + 1) * 16);
#pragma unroll
        for (int n = 0; n < S_NT; ++n) {
          uint32_t bf[4];
          ldmatrix_x4(bf, kv + ((s_nt0 + n) * 8 + (lane & 7)) * L::kStride + ks * 16 + (lane >> 3) * 8);
          mma_16816<T>(s[n], a0, bf);
          mma_16816<T>(s[n], a1, bf + 2);
        }
      }
#pragma unroll
      for (int n = 0; n < S_NT; ++n) {
        const int col = (s_nt0 + n) * 8 + (lane & 3) * 2;
        float* lo = sS + (s_rt * 16 + (lane >> 2)) * L::kSStride + col;
        lo[0] = s[n][0];
        lo[1] = s[n][1];
        lo[8 * L::kSStride] = s[n][2];
        lo[8 * L::kSStride + 1] = s[n][3];
      }
    }
    __syncthreads();

    {  // Online softmax of the tile, one row per TPR threads (all in one warp).
      const int64_t tile_start = k_begin + int64_t(t) * L::kKeys;
      float sv[KPT];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < KPT; ++i) {
        const int kk = sm_part * KPT + i;
        const int64_t j = tile_start + kk;
        sv[i] = (j < row_end && j < k_end) ? sS[sm_row * L::kSStride + kk] * qk_scale : -INFINITY;
        mx = fmaxf(mx, sv[i]);
      }
#pragma unroll
      for (int off = TPR / 2; off > 0; off /= 2) mx = fmaxf(mx, gpu::shfl_xor(mx, off));
      const float m_old = sM[sm_row];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < KPT; ++i) {
        const float pv = m_new == -INFINITY ? 0.f : fast_exp2(sv[i] - m_new);
        sum += pv;
        sP[sm_row * L::kPStride + sm_part * KPT + i] = from_float<T>(pv);
      }
#pragma unroll
      for (int off = TPR / 2; off > 0; off /= 2) sum += gpu::shfl_xor(sum, off);
      if (sm_part == 0) {  // the group's reads of sM happened before the shuffles above
        const float corr = m_new == -INFINITY ? 1.f : fast_exp2(m_old - m_new);
        sM[sm_row] = m_new;
        sL[sm_row] = sL[sm_row] * corr + sum;
        sCorr[sm_row] = corr;
      }
    }
    __syncthreads();

    {  // O = O * corr + P V for this warp's rows and columns.
      const float c_lo = sCorr[o_rt * 16 + (lane >> 2)], c_hi = sCorr[o_rt * 16 + (lane >> 2) + 8];
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        acc[n][0] *= c_lo;
        acc[n][1] *= c_lo;
        acc[n][2] *= c_hi;
        acc[n][3] *= c_hi;
      }
#pragma unroll
      for (int ks = 0; ks < L::kKeys / 16; ++ks) {
        uint32_t a[4];
        ldmatrix_x4(a, sP + (o_rt * 16 + (lane & 15)) * L::kPStride + ks * 16 + (lane >> 4) * 8);
        const T* vrow = kv + (ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * L::kStride + o_d0 + (lane >> 4) * 8;
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
          uint32_t bf[4];
          ldmatrix_x4_trans(bf, vrow + n * 8);
          mma_16816<T>(acc[n], a, bf);
          mma_16816<T>(acc[n + 1], a, bf + 2);
        }
      }
    }
    __syncthreads();  // the next iteration's load reuses this stage; S and P are rewritten
  }
  cp_async_wait<0>();
  __syncthreads();

  const bool bad = *sBad != 0;
  const int64_t num_rows = p.batch * rows_per_b;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = o_rt * 16 + (lane >> 2) + half * 8;
    if (row0 + r >= rows_per_b) continue;
    const int64_t row = b * rows_per_b + row0 + r;
    const float l = sL[r];
    const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int d = o_d0 + n * 8 + (lane & 3) * 2;
      const float o0 = bad ? NAN : acc[n][2 * half] * inv;
      const float o1 = bad ? NAN : acc[n][2 * half + 1] * inv;
      if (num_splits == 1) {
        T* o = static_cast<T*>(p.out) + row * kMlaLatentDim + d;
        o[0] = from_float<T>(o0);
        o[1] = from_float<T>(o1);
      } else {
        float* o = ws_out + (split * num_rows + row) * kMlaLatentDim + d;
        o[0] = o0;
        o[1] = o1;
      }
    }
    if (o_d0 == 0 && (lane & 3) == 0) {
      const float lse = bad ? NAN : (l > 0.f ? (sM[r] + __log2f(l)) * kLn2 : -INFINITY);
      if (num_splits == 1) p.lse[row] = lse;
      else ws_lse[split * num_rows + row] = lse;
    }
  }
}

}  // namespace jaxpaged
