// Paged attention, one query row per thread block: the first GPU kernel (correct; its speed is
// the subject of the next issue). It serves decode and ragged prefill rows alike.
//
// Block = (query row t x GH query heads that share one KV head, KV split). All GH heads sit in
// each thread's registers, so each K/V byte is read once per block, not once per head.
// Lanes: a key's D elements are spread over D/8 lanes (16 bytes each); a warp holds 32/(D/8)
// keys at once, each group of lanes with its own online-softmax state; groups, then warps,
// merge at the end. Splits cover equal parts of the row's visible key range and are merged by
// combine_splits_kernel.
#pragma once

#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "paged_attention/params.h"

namespace jaxpaged {

constexpr int kPagedThreads = 128;

template <typename T, int D, int GH>
__global__ void __launch_bounds__(kPagedThreads)
    paged_attention_kernel(const PagedAttentionParams p, int page_shift, float* __restrict__ ws_out,
                           float* __restrict__ ws_lse) {
  constexpr int VEC = 8;                // elements per 16-byte load
  constexpr int LPK = D / VEC;          // lanes per key
  constexpr int KPW = 32 / LPK;         // keys a warp holds at once
  constexpr int NW = kPagedThreads / 32;
  constexpr int UNROLL = GH >= 8 ? 2 : 4;  // keys per lane group in flight (bounded by registers)
  static_assert(D % VEC == 0 && LPK <= 32, "head dim must be a multiple of 8, at most 256");

  // Blocks of one row are adjacent in launch order (head chunk fastest), so chunks that share a KV
  // head run together and the second read of each K/V page comes from L2.
  const int head_chunks = int(p.num_q_heads / GH);
  const int64_t t = blockIdx.x / head_chunks;
  const int head0 = int(blockIdx.x % head_chunks) * GH;
  const int split = blockIdx.z, num_splits = gridDim.z;
  const int group = int(p.num_q_heads / p.num_kv_heads);
  const int kv_head = head0 / group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int key_in_warp = lane / LPK, dim0 = (lane % LPK) * VEC;

  // Which keys this row sees (masking.h), and this split's share of them.
  int64_t seq = t, q_begin = t, q_len = 1;
  const bool has_seq =
      p.decode_only || find_sequence(p.cu_q_lens, p.num_seqs, p.num_tokens, t, &seq, &q_begin, &q_len);
  KeyRange r{0, 0};
  if (has_seq) {
    const int64_t kv_len = clamp_kv_len(p.kv_lens[seq], p.max_pages * p.page_size);
    r = visible_keys(kv_len, q_len, t - q_begin, p.sliding_window);
  }
  const int64_t n = r.empty() ? 0 : r.end - r.begin;
  const int64_t chunk = (n + num_splits - 1) / num_splits;
  const int64_t k_begin = r.begin + split * chunk;
  const int64_t k_end = min(r.end, k_begin + chunk);

  // Scores live in the log2 domain so the softmax uses exp2; the scale folds into q when there
  // is no soft cap (with one, the cap applies to the natural-scale score first).
  const bool capped = p.soft_cap > 0.f;
  const float q_mul = capped ? p.scale : p.scale * kLog2e;
  const T* q_ptr = static_cast<const T*>(p.q) + (t * p.num_q_heads + head0) * D + dim0;
  float qf[GH][VEC];
#pragma unroll
  for (int g = 0; g < GH; ++g) {
    vec8_to_float<T>(load_vec8(q_ptr + g * D), qf[g]);
#pragma unroll
    for (int e = 0; e < VEC; ++e) qf[g][e] *= q_mul;
  }

  float m[GH], l[GH], acc[GH][VEC];
#pragma unroll
  for (int g = 0; g < GH; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[g][e] = 0.f;
  }

  const T* k_base = static_cast<const T*>(p.k_cache) + kv_head * p.head_stride + dim0;
  const T* v_base = static_cast<const T*>(p.v_cache) + kv_head * p.head_stride + dim0;
  const int32_t* table = p.block_tables + seq * p.max_pages;
  const int64_t page_mask = p.page_size - 1;
  bool bad_page = false;
  constexpr int STEP = NW * KPW;  // keys the block holds per unrolled slot

  // Page ids of a lane group's keys for one loop step. Fetched one step ahead, so the table read
  // (a dependent load) overlaps the previous step's math instead of delaying the K/V loads.
  auto fetch_pages = [&](int64_t base, int64_t page[UNROLL]) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t j = base + u * STEP + key_in_warp;
      page[u] = j < k_end ? table[j >> page_shift] : 0;
    }
  };
  int64_t next_page[UNROLL];
  fetch_pages(k_begin + warp * KPW, next_page);

  // The loop bound is warp-uniform (shuffles below need every lane); lanes past the end mask.
  for (int64_t base = k_begin + warp * KPW; base < k_end; base += STEP * UNROLL) {
    Vec8 kv[UNROLL], vv[UNROLL];
    bool ok[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t j = base + u * STEP + key_in_warp;
      const int64_t page = next_page[u];
      ok[u] = j < k_end;
      if (ok[u]) {
        if (page < 0 || page >= p.num_pages) {
          bad_page = true;
          ok[u] = false;
        } else {
          const int64_t off = page * p.page_stride + (j & page_mask) * p.slot_stride;
          kv[u] = load_vec8(k_base + off);
          vv[u] = load_vec8(v_base + off);
        }
      }
    }
    fetch_pages(base + STEP * UNROLL, next_page);
    float s[UNROLL][GH];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      float kf[VEC];
      if (ok[u]) vec8_to_float<T>(kv[u], kf);
#pragma unroll
      for (int g = 0; g < GH; ++g) {
        float dot = 0.f;
        if (ok[u]) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) dot += qf[g][e] * kf[e];
        }
#pragma unroll
        for (int off = LPK / 2; off > 0; off /= 2) dot += JP_SHFL_XOR(dot, off);
        if (capped) dot = p.soft_cap * fast_tanh(dot / p.soft_cap) * kLog2e;
        s[u][g] = ok[u] ? dot : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < GH; ++g) {
      float m_new = m[g];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) m_new = fmaxf(m_new, s[u][g]);
      if (m_new == -INFINITY) continue;  // nothing visible yet in this lane group
      const float corr = rescale(m[g], m_new);
      m[g] = m_new;
      l[g] *= corr;
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[g][e] *= corr;
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const float w = fast_exp2(s[u][g] - m_new);
        l[g] += w;
        if (ok[u]) {
          float vf[VEC];
          vec8_to_float<T>(vv[u], vf);
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[g][e] += w * vf[e];
        }
      }
    }
  }

  // Merge the lane groups of each warp (they hold different keys of the same heads).
#pragma unroll
  for (int off = LPK; off < 32; off *= 2) {
#pragma unroll
    for (int g = 0; g < GH; ++g) {
      const float m_o = JP_SHFL_XOR(m[g], off);
      const float l_o = JP_SHFL_XOR(l[g], off);
      const float m_new = fmaxf(m[g], m_o);
      const float c_me = m_new == -INFINITY ? 0.f : rescale(m[g], m_new);
      const float c_o = m_new == -INFINITY ? 0.f : rescale(m_o, m_new);
      l[g] = l[g] * c_me + l_o * c_o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float a_o = JP_SHFL_XOR(acc[g][e], off);
        acc[g][e] = acc[g][e] * c_me + a_o * c_o;
      }
      m[g] = m_new;
    }
  }

  // Merge the warps through shared memory; lanes of lane group 0 publish.
  __shared__ float sm_m[NW][GH], sm_l[NW][GH];
  __shared__ float sm_acc[NW][GH][D];
  if (key_in_warp == 0) {
#pragma unroll
    for (int g = 0; g < GH; ++g) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) sm_acc[warp][g][dim0 + e] = acc[g][e];
      if (lane == 0) {
        sm_m[warp][g] = m[g];
        sm_l[warp][g] = l[g];
      }
    }
  }
  bad_page = __syncthreads_or(bad_page);

  const int64_t num_rows = p.num_tokens * p.num_q_heads;
  for (int i = threadIdx.x; i < GH * D; i += kPagedThreads) {
    const int g = i / D, d = i % D;
    float m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < NW; ++w) m_all = fmaxf(m_all, sm_m[w][g]);
    float l_all = 0.f, a_all = 0.f;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const float c = rescale(sm_m[w][g], m_all);
      l_all += sm_l[w][g] * c;
      a_all += sm_acc[w][g][d] * c;
    }
    const bool empty = l_all == 0.f;
    float o = empty ? 0.f : a_all / l_all;
    float row_lse = empty ? -INFINITY : (m_all + __log2f(l_all)) * kLn2;
    if (bad_page) o = row_lse = NAN;
    const int64_t row = t * p.num_q_heads + head0 + g;
    if (num_splits == 1) {
      static_cast<T*>(p.out)[row * D + d] = from_float<T>(o);
      if (d == 0) p.lse[row] = row_lse;
    } else {
      ws_out[(split * num_rows + row) * D + d] = o;
      if (d == 0) ws_lse[split * num_rows + row] = row_lse;
    }
  }
}

}  // namespace jaxpaged
