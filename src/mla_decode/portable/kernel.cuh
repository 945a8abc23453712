// MLA decode on plain CUDA cores: the portable path (issue 19), like the paged one
// (src/paged_attention/portable/kernel.cuh): no tensor-core instruction, no asynchronous copy, no
// inline assembly, no warp shuffle - so this source is what a ROCm build compiles and what the
// NVIDIA build runs with JAXPAGED_PORTABLE_KERNELS=1. Every cache format: 16-bit (split or
// combined 576) and, on every GPU for now, the quantized ones (FMT below).
//
// Block = (batch row b, query token i, up to 16 query heads, KV split), 128 threads. The heads'
// 576-wide queries sit in shared memory; the sequence's cache rows stream through in tiles of 16
// tokens. Per tile: S [heads x 16] (each thread two (head, token) dot products over 576), then
// each head's online softmax and O += P V, a head's 512 output columns owned by 8 threads (64
// each). A bad page id among the visible tokens, or a NaN key, makes the block's rows NaN, as in
// the reference; masked tokens are never read.
//
// SPARSE (mla_decode_sparse, DeepSeek-V3.2's top-k; the only GPU kernel it has so far): the tokens
// of query token i are the slots its index list names (page * page_size + offset; the first
// topk_lens[b] of topk), not a block table's prefix: a slot outside the pool is no key (masked,
// never read, no NaN), a duplicate counts twice.
//
// Quantized caches (FMT): kMlaFp8 - fp8 latent values (e4m3 or e5m2) with the per-tensor kv_scale,
// the rope fp8 too (combined 576 bytes) or 16-bit of q's dtype (split); kMlaDsRows - DeepSeek-V3.2's
// 656-byte rows: 512 e4m3 latent values, four float32 scales (one per 128 values), 64 bfloat16 rope
// values. The fp8 values land in shared memory as T (exact: every fp8 value is a half and a bf16)
// and each tile token keeps five scales (one per 128 latent columns, one for the rope); a dot
// product sums each group times its scale, and P V multiplies a token's weight by the scale of the
// group the thread's 64 columns lie in - so the math is the reference's dequantize-then-attend in
// float32, up to summation order. A 656-byte row's rope stays bfloat16 bits in shared memory.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/fp8.cuh"
#include "common/gpu_math.cuh"
#include "common/masking.h"
#include "mla_decode/params.h"

namespace jaxpaged {

constexpr int kMlaPortableThreads = 128;
constexpr int kMlaPortableHeads = 16;  // query heads per block (8 threads per head)
constexpr int kMlaPortableKeys = 16;   // cache tokens per tile

// A sparse call's index lists (read by SPARSE instances only).
struct MlaSparseLists {
  const int32_t* indices;    // [batch, s_q, topk]
  const int32_t* topk_lens;  // [batch], or nullptr: every entry counts
  int64_t topk;
};

template <typename T, bool SPARSE, int FMT>
__global__ void __launch_bounds__(kMlaPortableThreads)
    mla_portable_kernel(const MlaDecodeParams p, int page_shift, const MlaSparseLists lists,
                        float* __restrict__ ws_out, float* __restrict__ ws_lse) {
  constexpr int HB = kMlaPortableHeads, KT = kMlaPortableKeys, NT = kMlaPortableThreads;
  constexpr int W = kMlaLatentDim + kMlaRopeDim;  // 576
  constexpr int S = W + 8;                        // row stride: 1168 bytes, rows start in different banks
  constexpr int CH = W / 8;                       // 16-byte chunks per row (64 latent + 8 rope)
  constexpr int TPH = NT / HB;                    // threads per head
  constexpr int DPT = kMlaLatentDim / TPH;        // output columns per thread
  static_assert(TPH * HB == NT && DPT * TPH == kMlaLatentDim, "8 threads x 64 columns per head");
  __shared__ __align__(16) T sQ[HB * S];
  __shared__ __align__(16) T sK[KT * S];
  __shared__ float sS[HB][KT];
  __shared__ int sValid[KT];  // whether tile token k is a key (loaded)
  __shared__ float sScale[KT][5];  // quantized caches: a token's scales (4 latent groups, rope)
  __shared__ int sPoison;
  // The rope values' type in sK: a 656-byte row's are bfloat16 whatever q's dtype.
  using RopeT = typename std::conditional<FMT == kMlaDsRows, gpu_bf16, T>::type;
  // A latent value of sK as a float: 656-byte rows read as float16 hold f16 bits whatever T.
  const bool latent_f16 = FMT == kMlaDsRows && p.ds_f16;
  auto latent_at = [&](int i) -> float {
    return latent_f16 ? to_float(reinterpret_cast<const gpu_half*>(sK)[i]) : to_float(sK[i]);
  };

  const int tid = threadIdx.x;
  const int64_t groups = (p.num_heads + HB - 1) / HB;
  const int64_t b = blockIdx.x / (p.s_q * groups);
  const int64_t i = (blockIdx.x / groups) % p.s_q;
  const int64_t h0 = (blockIdx.x % groups) * HB;
  const int hb = int(p.num_heads - h0 < HB ? p.num_heads - h0 : HB);  // heads in this block
  const int split = blockIdx.z, num_splits = gridDim.z;

  // Tokens of query token i - positions in the sequence, or entries of its index list - and this
  // split's share in whole tiles.
  int64_t n = 0;
  const int32_t* list = nullptr;
  if constexpr (SPARSE) {
    const int64_t count = lists.topk_lens == nullptr ? lists.topk : lists.topk_lens[b];
    n = count < 0 ? 0 : (count > lists.topk ? lists.topk : count);
    list = lists.indices + (b * p.s_q + i) * lists.topk;
  } else {
    const int64_t kv_len = clamp_kv_len(p.kv_lens[b], p.max_pages * p.page_size);
    const int64_t end = p.causal ? visible_keys(kv_len, p.s_q, i, 0).end : kv_len;
    n = end > 0 ? end : 0;
  }
  const int64_t per_split = (n + num_splits - 1) / num_splits;
  const int64_t chunk = (per_split + KT - 1) / KT * KT;
  const int64_t k_begin = split * chunk;
  const int64_t k_end = k_begin + chunk < n ? k_begin + chunk : n;

  // Queries: latent then rope; heads past the call's read as 0.
  const T* q_nope = static_cast<const T*>(p.q_nope);
  const T* q_pe = static_cast<const T*>(p.q_pe);
  for (int c = tid; c < HB * CH; c += NT) {
    const int h = c / CH, ch = c % CH;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (h < hb) {
      const int64_t row = (b * p.s_q + i) * p.num_heads + h0 + h;
      v = ch < kMlaLatentDim / 8 ? *reinterpret_cast<const uint4*>(q_nope + row * kMlaLatentDim + ch * 8)
                                 : *reinterpret_cast<const uint4*>(q_pe + row * kMlaRopeDim + (ch - 64) * 8);
    }
    *reinterpret_cast<uint4*>(sQ + h * S + ch * 8) = v;
  }
  if (tid == 0) sPoison = 0;

  const float s_mul = mla_scale(p) * kLog2e;  // scores in the log2 domain
  const int my_head = tid / TPH, d0 = (tid % TPH) * DPT;
  float m = -INFINITY, l = 0.f, acc[DPT];
#pragma unroll
  for (int d = 0; d < DPT; ++d) acc[d] = 0.f;
  const int32_t* table = SPARSE ? nullptr : p.block_tables + b * p.max_pages;
  const int64_t page_mask = p.page_size - 1;
  const int64_t pool = p.num_pages * p.page_size;
  const T* ckv = static_cast<const T*>(p.ckv);
  const T* kpe = static_cast<const T*>(p.kpe);
  // Quantized caches: bytes, strides in bytes (fp8, 656-byte rows) or, for a 16-bit kpe beside
  // an fp8 latent cache, in T.
  const unsigned char* ckv8 = static_cast<const unsigned char*>(p.ckv);
  const unsigned char* kpe8 = static_cast<const unsigned char*>(p.kpe);
  const float kv_scale = FMT == kMlaFp8 ? mla_kv_scale(p) : 1.f;
  const float rope_scale = FMT == kMlaFp8 && p.kpe_fp8 ? kv_scale : 1.f;
  bool poison = false;

  for (int64_t base = k_begin; base < k_end; base += KT) {
    __syncthreads();  // the previous tile's readers are done (and, first time, the queries landed)
    for (int c = tid; c < KT * CH; c += NT) {
      const int k = c / CH, ch = c % CH;
      const int64_t j = base + k;
      bool key = j < k_end;
      int64_t page = 0, slot = 0;
      if (key) {
        if constexpr (SPARSE) {
          const int64_t s = list[j];
          key = s >= 0 && s < pool;  // else no key: masked, never read
          page = key ? s / p.page_size : 0;  // (any page size: the sparse op does not ask a power of two)
          slot = key ? s % p.page_size : 0;
        } else {
          page = table[j >> page_shift];
          slot = j & page_mask;
          if (page < 0 || page >= p.num_pages) {
            poison = true;  // the reference's rows are NaN
            key = false;
          }
        }
      }
      uint4 v = make_uint4(0, 0, 0, 0);
      if (key) {
        const bool latent = ch < kMlaLatentDim / 8;
        const int64_t at_ckv = page * p.ckv_page_stride + slot * p.ckv_slot_stride;
        const int64_t at_kpe = page * p.kpe_page_stride + slot * p.kpe_slot_stride;
        if constexpr (FMT == kMlaSame) {
          v = latent ? *reinterpret_cast<const uint4*>(ckv + at_ckv + ch * 8)
                     : *reinterpret_cast<const uint4*>(kpe + at_kpe + (ch - 64) * 8);
        } else if constexpr (FMT == kMlaFp8) {
          if (latent) v = fp8x8_to<T>(*reinterpret_cast<const uint2*>(ckv8 + at_ckv + ch * 8), p.kv_e5m2);
          else if (p.kpe_fp8) v = fp8x8_to<T>(*reinterpret_cast<const uint2*>(kpe8 + at_kpe + (ch - 64) * 8), p.kv_e5m2);
          else v = *reinterpret_cast<const uint4*>(kpe + at_kpe + (ch - 64) * 8);
        } else {  // 656-byte rows: e4m3 latent, bf16 rope (its bits as they are)
          const unsigned char* row = ckv8 + at_ckv;
          if (!latent) {
            v = *reinterpret_cast<const uint4*>(row + kMlaDsRopeAt + (ch - 64) * 16);
          } else if (p.ds_bf16) {  // value x group scale rounded to bf16 (T is bf16 then); scales 1 below
            v = fp8x8_scaled_to<T>(*reinterpret_cast<const uint2*>(row + ch * 8),
                                   *reinterpret_cast<const float*>(row + kMlaDsScalesAt + 4 * (ch / 16)));
          } else if (p.ds_f16) {  // f16(value x f16(group scale)), held as f16 bits whatever T; scales 1
            v = fp8x8_f16_scaled(*reinterpret_cast<const uint2*>(row + ch * 8),
                                 *reinterpret_cast<const float*>(row + kMlaDsScalesAt + 4 * (ch / 16)));
          } else {
            v = fp8x8_to<T>(*reinterpret_cast<const uint2*>(row + ch * 8), false);
          }
        }
      }
      *reinterpret_cast<uint4*>(sK + k * S + ch * 8) = v;
      if (ch == 0) sValid[k] = key;
      if constexpr (FMT != kMlaSame) {
        if (ch == 1) {  // a token's scales (0 for no key: its weight is 0 and its values 0)
          float g[4] = {kv_scale, kv_scale, kv_scale, kv_scale};
          if constexpr (FMT == kMlaDsRows) {
            if (key && (p.ds_bf16 || p.ds_f16)) {
              g[0] = g[1] = g[2] = g[3] = 1.f;  // (applied as the values were read)
            } else if (key) {
              const float4 f = *reinterpret_cast<const float4*>(
                  ckv8 + page * p.ckv_page_stride + slot * p.ckv_slot_stride + kMlaDsScalesAt);
              g[0] = f.x, g[1] = f.y, g[2] = f.z, g[3] = f.w;
            }
          }
#pragma unroll
          for (int q = 0; q < 4; ++q) sScale[k][q] = key ? g[q] : 0.f;
          sScale[k][4] = key ? rope_scale : 0.f;
        }
      }
    }
    __syncthreads();
    // S: (head, token) pairs tid and tid + NT.
    for (int pair = tid; pair < HB * KT; pair += NT) {
      const int h = pair / KT, k = pair % KT;
      float dot = 0.f;
      if constexpr (FMT == kMlaSame) {
        for (int e = 0; e < W; e += 2) {
          dot += to_float(sQ[h * S + e]) * to_float(sK[k * S + e]) +
                 to_float(sQ[h * S + e + 1]) * to_float(sK[k * S + e + 1]);
        }
      } else {  // each scale group's sum times its scale
        for (int grp = 0; grp < 4; ++grp) {
          float part = 0.f;
          for (int e = 128 * grp; e < 128 * grp + 128; e += 2) {
            part += to_float(sQ[h * S + e]) * latent_at(k * S + e) + to_float(sQ[h * S + e + 1]) * latent_at(k * S + e + 1);
          }
          dot += part * sScale[k][grp];
        }
        const RopeT* rope = reinterpret_cast<const RopeT*>(sK + k * S + kMlaLatentDim);
        float part = 0.f;
        for (int e = 0; e < kMlaRopeDim; ++e) part += to_float(sQ[h * S + kMlaLatentDim + e]) * to_float(rope[e]);
        dot += part * sScale[k][4];
      }
      const bool visible = sValid[k] != 0;
      poison |= visible && h < hb && dot != dot;  // a NaN key: the reference's rows are NaN
      sS[h][k] = visible ? dot * s_mul : -INFINITY;
    }
    __syncthreads();
    // Online softmax of this thread's head (its 8 threads compute the same state), then O += P V.
    float m_tile = -INFINITY;
#pragma unroll
    for (int k = 0; k < KT; ++k) m_tile = fmaxf(m_tile, sS[my_head][k]);
    const float m_new = fmaxf(m, m_tile);
    if (m_new == -INFINITY) continue;  // nothing visible yet
    const float corr = rescale(m, m_new);
    m = m_new;
    l *= corr;
#pragma unroll
    for (int d = 0; d < DPT; ++d) acc[d] *= corr;
    for (int k = 0; k < KT; ++k) {
      const float w = fast_exp2(sS[my_head][k] - m_new);
      l += w;
      if (w == 0.f) continue;
      // (a quantized token's values times the scale of the group this thread's columns lie in)
      const float wv = FMT == kMlaSame ? w : w * sScale[k][d0 / 128];
#pragma unroll
      for (int d = 0; d < DPT; ++d) acc[d] += wv * latent_at(k * S + d0 + d);
    }
  }
  if (poison) sPoison = 1;  // benign race: every writer stores 1
  __syncthreads();
  const bool poisoned = sPoison != 0;

  if (my_head >= hb) return;
  const int64_t num_rows = p.batch * p.s_q * p.num_heads;
  const int64_t row = (b * p.s_q + i) * p.num_heads + h0 + my_head;
  const bool empty = !(l > 0.f);
  const float inv = empty ? 0.f : 1.f / l;
  const float row_lse = poisoned ? NAN : (empty ? -INFINITY : (m + __log2f(l)) * kLn2);
#pragma unroll
  for (int d = 0; d < DPT; ++d) {
    const float o = poisoned ? NAN : acc[d] * inv;
    if (num_splits == 1) static_cast<T*>(p.out)[row * kMlaLatentDim + d0 + d] = from_float<T>(o);
    else ws_out[(split * num_rows + row) * kMlaLatentDim + d0 + d] = o;
  }
  if (tid % TPH == 0) {
    if (num_splits == 1) p.lse[row] = row_lse;
    else ws_lse[split * num_rows + row] = row_lse;
  }
}

}  // namespace jaxpaged
