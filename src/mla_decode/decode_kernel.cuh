// MLA decode, first GPU kernel: correct and free of host round trips; tensor cores come with
// the next issue.
//
// Block = (batch row b, 16 query rows of its s_q x Hq, KV split); 4 warps x 4 rows. A whole warp
// works on one cached token at a time: lane i holds latent dims [8i, 8i+8) and [256+8i, 256+8i+8)
// (two 16-byte loads, coalesced) and rope dims [2i, 2i+2); dots reduce across the warp. The
// latent row is also the value, so it is loaded once for both products. The 4 warps walk the same
// tokens, so 3 of the 4 reads of each row hit L1.
#pragma once

#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "mla_decode/params.h"

namespace jaxpaged {

constexpr int kMlaThreads = 128;
constexpr int kMlaRowsPerWarp = 4;
constexpr int kMlaRowsPerBlock = kMlaRowsPerWarp * (kMlaThreads / 32);  // jaxpaged/mla_decode.py

template <typename T>
__global__ void __launch_bounds__(kMlaThreads)
    mla_decode_kernel(const MlaDecodeParams p, int page_shift, float* __restrict__ ws_out,
                      float* __restrict__ ws_lse) {
  constexpr int RW = kMlaRowsPerWarp;
  constexpr int UNROLL = 2;
  const int64_t b = blockIdx.x;
  const int split = blockIdx.z, num_splits = gridDim.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rows_per_b = p.s_q * p.num_heads;
  const int64_t row0 = blockIdx.y * int64_t(kMlaRowsPerBlock) + warp * RW;  // within batch row b

  const int64_t kv_len = clamp_kv_len(p.kv_lens[b], p.max_pages * p.page_size);
  const int64_t chunk = (kv_len + num_splits - 1) / num_splits;
  const int64_t k_begin = split * chunk;
  const int64_t k_end = min(kv_len, k_begin + chunk);

  // Per row: its query (scaled into the log2 domain) and the end of its visible keys.
  const float q_mul = p.scale * kLog2e;
  float qa[RW][8], qb[RW][8], qr[RW][2];
  int64_t row_end[RW];
#pragma unroll
  for (int r = 0; r < RW; ++r) {
    const int64_t row = row0 + r;
    const bool live = row < rows_per_b;
    const int64_t i = live ? row / p.num_heads : 0;
    row_end[r] = !live ? 0 : (p.causal ? visible_keys(kv_len, p.s_q, i, 0).end : kv_len);
    const int64_t g = (b * rows_per_b + (live ? row : 0));
    const T* qn = static_cast<const T*>(p.q_nope) + g * kMlaLatentDim;
    const T* qp = static_cast<const T*>(p.q_pe) + g * kMlaRopeDim;
    vec8_to_float<T>(load_vec8(qn + lane * 8), qa[r]);
    vec8_to_float<T>(load_vec8(qn + 256 + lane * 8), qb[r]);
    qr[r][0] = to_float(qp[lane * 2]);
    qr[r][1] = to_float(qp[lane * 2 + 1]);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      qa[r][e] *= q_mul;
      qb[r][e] *= q_mul;
    }
    qr[r][0] *= q_mul;
    qr[r][1] *= q_mul;
  }

  float m[RW], l[RW], acc[RW][16];
#pragma unroll
  for (int r = 0; r < RW; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int e = 0; e < 16; ++e) acc[r][e] = 0.f;
  }

  const T* ckv = static_cast<const T*>(p.ckv);
  const T* kpe = static_cast<const T*>(p.kpe);
  const int32_t* table = p.block_tables + b * p.max_pages;
  const int64_t page_mask = p.page_size - 1;
  bool bad_page = false;

  for (int64_t j0 = k_begin; j0 < k_end; j0 += UNROLL) {
    Vec8 ca[UNROLL], cb[UNROLL];
    uint32_t rp[UNROLL];
    bool ok[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t j = j0 + u;
      ok[u] = j < k_end;
      if (ok[u]) {
        const int64_t page = table[j >> page_shift];
        if (page < 0 || page >= p.num_pages) {
          bad_page = true;
          ok[u] = false;
        } else {
          const int64_t slot = j & page_mask;
          const T* c = ckv + page * p.ckv_page_stride + slot * p.ckv_slot_stride;
          ca[u] = load_vec8(c + lane * 8);
          cb[u] = load_vec8(c + 256 + lane * 8);
          rp[u] = *reinterpret_cast<const uint32_t*>(kpe + page * p.kpe_page_stride +
                                                     slot * p.kpe_slot_stride + lane * 2);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (!ok[u]) continue;  // warp-uniform: every lane sees the same token
      float cf[16], rf[2];
      vec8_to_float<T>(ca[u], cf);
      vec8_to_float<T>(cb[u], cf + 8);
      const T* rpt = reinterpret_cast<const T*>(&rp[u]);
      rf[0] = to_float(rpt[0]);
      rf[1] = to_float(rpt[1]);
      const int64_t j = j0 + u;
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        float dot = qr[r][0] * rf[0] + qr[r][1] * rf[1];
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += qa[r][e] * cf[e] + qb[r][e] * cf[8 + e];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) dot += JP_SHFL_XOR(dot, off);
        if (j >= row_end[r]) continue;  // causal mask (uniform across the warp)
        const float m_new = fmaxf(m[r], dot);
        const float corr = rescale(m[r], m_new);
        const float w = fast_exp2(dot - m_new);
        m[r] = m_new;
        l[r] = l[r] * corr + w;
#pragma unroll
        for (int e = 0; e < 16; ++e) acc[r][e] = acc[r][e] * corr + w * cf[e];
      }
    }
  }
  bad_page = __syncthreads_or(bad_page);

  const int64_t num_rows = p.batch * rows_per_b;
#pragma unroll
  for (int r = 0; r < RW; ++r) {
    if (row0 + r >= rows_per_b) continue;
    const int64_t row = b * rows_per_b + row0 + r;
    const bool empty = l[r] == 0.f;
    const float inv = empty ? 0.f : 1.f / l[r];
    float row_lse = empty ? -INFINITY : (m[r] + __log2f(l[r])) * kLn2;
    if (bad_page) row_lse = NAN;
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      const int d = e < 8 ? lane * 8 + e : 256 + lane * 8 + (e - 8);
      const float o = bad_page ? NAN : acc[r][e] * inv;
      if (num_splits == 1) {
        static_cast<T*>(p.out)[row * kMlaLatentDim + d] = from_float<T>(o);
      } else {
        ws_out[(split * num_rows + row) * kMlaLatentDim + d] = o;
      }
    }
    if (lane == 0) {
      if (num_splits == 1) p.lse[row] = row_lse;
      else ws_lse[split * num_rows + row] = row_lse;
    }
  }
}

}  // namespace jaxpaged
