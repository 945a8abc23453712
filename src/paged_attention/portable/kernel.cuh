// Paged attention on plain CUDA cores: the portable path (issue 19). No tensor-core instruction,
// no asynchronous copy, no inline assembly - only what src/gpu_vendor.h spells for both CUDA and
// HIP - so this one source is what a ROCm build compiles and what the NVIDIA build runs when
// JAXPAGED_PORTABLE_KERNELS=1 (so the GPU suite tests it on the H100). It serves every call the
// tile kernel serves: decode and ragged prefill rows, every option, 16-bit and fp8 caches.
//
// Block = (one query row t, GH query heads that share a KV head, KV split). The GH heads' queries
// sit in each thread's registers, so a block reads each K/V byte once for its heads. Lanes: a
// key's D values are spread over D/8 lanes (8 values each); a 32-lane group holds 32/(D/8) keys at
// once, each lane group with its own online softmax; the groups, then the block's 32-lane groups,
// merge at the end. Every shuffle stays inside 32 lanes (gpu::shfl_xor), so a 64-wide AMD
// wavefront runs it as two independent halves. Splits cover equal parts of the row's visible keys
// and are merged by combine_splits_kernel.
//
// Results follow the reference in what is defined: a row whose visible keys touch an
// out-of-range page id, or a NaN key, is NaN (only that row and KV head's query heads: a block is
// one row of one KV head), masked keys are never read, a row with no visible key is 0 with lse -inf.
#pragma once

#include <cstdint>

#include "common/fp8.cuh"
#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "paged_attention/params.h"

namespace jaxpaged {

constexpr int kPortableThreads = 128;
constexpr int kPortableMaxHeads = 8;  // query heads per block, at most

// The query heads one block takes: the largest power of two up to 8 that divides the GQA group.
inline int portable_heads_per_block(int64_t group) {
  int gh = kPortableMaxHeads;
  while (gh > 1 && group % gh != 0) gh /= 2;
  return gh;
}

// Eight consecutive cache values at element offset `off` (16 bytes of a 16-bit cache, 8 of fp8).
template <typename T, bool FP8>
__device__ __forceinline__ void load8(const void* base, int64_t off, bool e5m2, float out[8]) {
  if constexpr (FP8) {
    fp8x8_to_float(*reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(base) + off), e5m2, out);
  } else {
    vec8_to_float<T>(load_vec8(static_cast<const T*>(base) + off), out);
  }
}

// gh (runtime, <= kPortableMaxHeads, a power of two dividing the group) heads per block.
template <typename T, int D, bool FP8>
__global__ void __launch_bounds__(kPortableThreads)
    paged_portable_kernel(const PagedAttentionParams p, int page_shift, int gh, float* __restrict__ ws_out,
                          float* __restrict__ ws_lse) {
  constexpr int GH = kPortableMaxHeads;
  constexpr int VEC = 8;                   // values per lane per key
  constexpr int LPK = D / VEC;             // lanes per key
  constexpr int KPG = 32 / LPK;            // keys a 32-lane group holds at once
  constexpr int NG = kPortableThreads / 32;  // 32-lane groups per block
  constexpr int UNROLL = 2;                // keys per lane group in flight
  constexpr int STEP = NG * KPG;           // keys the block holds per unrolled slot
  static_assert(D % VEC == 0 && LPK <= 32 && 32 % LPK == 0, "head dim 64, 128 or 256");

  const int head_chunks = int(p.num_q_heads / gh);
  const int64_t t = blockIdx.x / head_chunks;
  const int head0 = int(blockIdx.x % head_chunks) * gh;
  const int split = blockIdx.z, num_splits = gridDim.z;
  const int group = int(p.num_q_heads / p.num_kv_heads);
  const int kv_head = head0 / group;
  const int grp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int key_in_grp = lane / LPK, dim0 = (lane % LPK) * VEC;
  const PagedOptions opt = paged_options(p);

  // Which keys this row sees (masking.h), and this split's share of them.
  int64_t seq = t, q_begin = t, q_len = 1;
  const bool has_seq =
      p.decode_only || find_sequence(p.cu_q_lens, p.num_seqs, p.num_tokens, t, &seq, &q_begin, &q_len);
  KeyRange r{0, 0};
  if (has_seq) {
    const int64_t kv_len = clamp_kv_len(p.kv_lens[seq], p.max_pages * p.page_size);
    r = visible_keys(kv_len, q_len, t - q_begin, opt.sliding_window);
  }
  const int64_t n = r.empty() ? 0 : r.end - r.begin;
  const int64_t chunk = (n + num_splits - 1) / num_splits;
  const int64_t k_begin = r.begin + split * chunk;
  const int64_t k_end = k_begin + chunk < r.end ? k_begin + chunk : r.end;

  // Scores in the log2 domain (softmax by exp2). Without a soft cap, scale (and an fp8 cache's
  // k_scale) fold into q; with one, the cap applies to the natural-scale score.
  const bool capped = opt.soft_cap > 0.f;
  const float k_mul = FP8 ? opt.k_scale : 1.f;
  const float q_mul = capped ? opt.scale * k_mul : opt.scale * k_mul * kLog2e;
  float qf[GH][VEC];
#pragma unroll
  for (int g = 0; g < GH; ++g) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) qf[g][e] = 0.f;
    if (g < gh) {
      const T* q_ptr = static_cast<const T*>(p.q) + (t * p.num_q_heads + head0 + g) * D + dim0;
      vec8_to_float<T>(load_vec8(q_ptr), qf[g]);
#pragma unroll
      for (int e = 0; e < VEC; ++e) qf[g][e] *= q_mul;
    }
  }

  float m[GH], l[GH], acc[GH][VEC];
#pragma unroll
  for (int g = 0; g < GH; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[g][e] = 0.f;
  }

  const int64_t head_off = kv_head * p.head_stride + dim0;
  const int32_t* table = p.block_tables + seq * p.max_pages;
  const int64_t page_mask = p.page_size - 1;
  bool bad_page = false;  // an out-of-range page id among the visible keys
  bool nan_key = false;   // a NaN score (a NaN in a key): the reference's row is NaN too

  // The loop bound is uniform over a 32-lane group (the shuffles need all its lanes); lanes past
  // the end mask their keys.
  for (int64_t base = k_begin + grp * KPG; base < k_end; base += STEP * UNROLL) {
    float kf[UNROLL][VEC], vf[UNROLL][VEC];
    bool ok[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t j = base + u * STEP + key_in_grp;
      ok[u] = j < k_end;
      if (ok[u]) {
        const int64_t page = table[j >> page_shift];
        if (page < 0 || page >= p.num_pages) {
          bad_page = true;
          ok[u] = false;
        } else {
          const int64_t off = page * p.page_stride + (j & page_mask) * p.slot_stride + head_off;
          load8<T, FP8>(p.k_cache, off, p.kv_e5m2, kf[u]);
          load8<T, FP8>(p.v_cache, off, p.kv_e5m2, vf[u]);
        }
      }
    }
    float s[UNROLL][GH];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
      for (int g = 0; g < GH; ++g) {
        float dot = 0.f;
        if (ok[u]) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) dot += qf[g][e] * kf[u][e];
        }
#pragma unroll
        for (int off = LPK / 2; off > 0; off /= 2) dot += gpu::shfl_xor(dot, off);
        nan_key |= ok[u] && dot != dot;  // before the cap, which would clamp it
        if (capped) dot = opt.soft_cap * fast_tanh(dot / opt.soft_cap) * kLog2e;
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
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[g][e] += w * vf[u][e];
        }
      }
    }
  }

  // Merge the lane groups of each 32-lane group (same heads, different keys).
#pragma unroll
  for (int off = LPK; off < 32; off *= 2) {
#pragma unroll
    for (int g = 0; g < GH; ++g) {
      const float m_o = gpu::shfl_xor(m[g], off);
      const float l_o = gpu::shfl_xor(l[g], off);
      const float m_new = fmaxf(m[g], m_o);
      const float c_me = m_new == -INFINITY ? 0.f : rescale(m[g], m_new);
      const float c_o = m_new == -INFINITY ? 0.f : rescale(m_o, m_new);
      l[g] = l[g] * c_me + l_o * c_o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float a_o = gpu::shfl_xor(acc[g][e], off);
        acc[g][e] = acc[g][e] * c_me + a_o * c_o;
      }
      m[g] = m_new;
    }
  }

  // Merge the block's 32-lane groups through shared memory; lane group 0 of each publishes.
  __shared__ float sm_m[NG][GH], sm_l[NG][GH];
  __shared__ float sm_acc[NG][GH][D];
  if (key_in_grp == 0) {
#pragma unroll
    for (int g = 0; g < GH; ++g) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) sm_acc[grp][g][dim0 + e] = acc[g][e];
      if (lane == 0) {
        sm_m[grp][g] = m[g];
        sm_l[grp][g] = l[g];
      }
    }
  }
  const bool poisoned = __syncthreads_or(bad_page || nan_key);

  const float v_mul = FP8 ? opt.v_scale : 1.f;
  const int64_t num_rows = p.num_tokens * p.num_q_heads;
  for (int i = threadIdx.x; i < gh * D; i += kPortableThreads) {
    const int g = i / D, d = i % D;
    float m_all = -INFINITY;
#pragma unroll
    for (int w = 0; w < NG; ++w) m_all = fmaxf(m_all, sm_m[w][g]);
    float l_all = 0.f, a_all = 0.f;
#pragma unroll
    for (int w = 0; w < NG; ++w) {
      const float c = rescale(sm_m[w][g], m_all);
      l_all += sm_l[w][g] * c;
      a_all += sm_acc[w][g][d] * c;
    }
    const bool empty = !(l_all > 0.f);
    float o = empty ? 0.f : a_all * v_mul / l_all;  // a NaN value (not key) makes o NaN, lse stays
    float row_lse = empty ? -INFINITY : (m_all + __log2f(l_all)) * kLn2;
    if (poisoned) o = row_lse = NAN;
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
