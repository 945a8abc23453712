// The end of a sequence in the MLA Hopper kernel (kernel.cuh): the two compute warpgroups' row
// sums meet, and each writes its 256 output columns of its rows - straight to the output for a
// sequence this partition holds whole, else as a float partial result (and lse) in the piece's
// workspace slot for mla_merge_pieces_kernel.
#pragma once

#include "common/gpu_math.cuh"
#include "common/sm90/wgmma.cuh"
#include "mla_decode/partition_schedule.cuh"
#include "mla_decode/sm90/compute.cuh"

namespace jaxpaged {

// A finished row's output factor and lse from its sum of probabilities `sum` and final maximum `m`
// (log2 domain), the rules of the reference: a NaN key makes the sum NaN (out and lse NaN), no key
// makes it 0 (out 0, lse -inf). `scale` is what the row's accumulated outputs are multiplied by
// besides 1 / sum. Shared by the Hopper kernels' epilogues (this file, fp8_narrow.cuh).
__device__ __forceinline__ float mla_row_inverse(float sum, float scale) {
  return sum > 0.f ? scale / sum : (sum == 0.f ? 0.f : NAN);
}
// A finished row's output values are o x inv & keep (mla_row_output): inv as above, NaN for a
// sequence with a bad page id; keep clears a row that saw no key (sum 0) to +0 - its
// probabilities were 0, but o may hold 0 x NaN from values of keys other rows see, which the
// reference's rule (no key, out 0) does not let through. One multiply and one AND a value.
struct MlaRowFactor {
  float inv;
  uint32_t keep;
};
__device__ __forceinline__ MlaRowFactor mla_row_factor(float sum, float scale, bool bad) {
  return {bad ? NAN : mla_row_inverse(sum, scale), sum == 0.f && !bad ? 0u : ~0u};
}
__device__ __forceinline__ float mla_row_output(float o, MlaRowFactor f) {
  return __uint_as_float(__float_as_uint(o * f.inv) & f.keep);
}
__device__ __forceinline__ float mla_row_lse(float m, float sum, bool bad) {
  return bad ? NAN : (sum > 0.f ? (m + __log2f(sum)) * kLn2 : (sum == 0.f ? -INFINITY : NAN));
}

// A 4 x 4 transpose of 32-bit words across the four lanes of a quad (q = lane % 4): lane q's
// v[k] becomes lane k's v[q]. Two exchanges, each swapping the off-diagonal 2 x 2 blocks (lanes
// q ^ 2, then q ^ 1); every lane of the warp must take part. kStride: the quad's lanes kStride
// apart (q = (lane / kStride) % 4; the wide fp8 kernel's epilogue: 4).
template <int kStride = 1>
__device__ __forceinline__ void quad_transpose4(uint32_t (&v)[4], int q) {
  const bool a = q & 2, c = q & 1;
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // the words whose index bit 1 differs from q's
    const uint32_t got = gpu::shfl_xor(a ? v[i] : v[2 + i], 2 * kStride);
    if (a) v[i] = got;
    else v[2 + i] = got;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // then bit 0
    const uint32_t got = gpu::shfl_xor(c ? v[2 * i] : v[2 * i + 1], kStride);
    if (c) v[2 * i] = got;
    else v[2 * i + 1] = got;
  }
}

#if defined(JP_HAVE_WGMMA)  // the sm_90a device pass (wgmma.cuh)
// l: this thread's shares of its rows' sums; m: their final maxima (log2 domain); o: its half of
// the rows' outputs (a row that saw no key is zeroed here); bad: a page id of this warpgroup's
// tiles was out of range (the whole sequence then comes out NaN).
// kAnyBarrier: the warpgroups run different code (the split schedule), so they meet at a
// non-.aligned barrier.
// This code runs once a sequence, so it is fetched cold (from L2, ~1.6 bytes a cycle): it is kept
// short - each row's factor once before the stores, whole and cut sequences in separate loops, a
// few instructions a value (the wide kernel's epilogue, 608c3be, NOTES item 84 h).
template <typename T, typename W, bool kAnyBarrier = false>
__device__ __forceinline__ void mla_store_sequence(const W& w, const MlaSchedule& s,
                                                   int part, int b, MlaRowPair& l, const MlaRowPair& m,
                                                   float (&o)[128], bool& bad, float* __restrict__ ws_out,
                                                   float* __restrict__ ws_lse) {
#pragma unroll
  for (int off = 1; off <= 2; off *= 2) {
    l.lo += gpu::shfl_xor(l.lo, off);
    l.hi += gpu::shfl_xor(l.hi, off);
  }
  w.sSum[w.wg * 256 + 2 * w.tw] = l.lo;
  w.sSum[w.wg * 256 + 2 * w.tw + 1] = l.hi;
  if (w.tw == 0) w.sBadWg[w.wg] = bad ? 1 : 0;
  W::template meet<kAnyBarrier>();
  const float sum_lo = l.lo + w.sSum[(1 - w.wg) * 256 + 2 * w.tw];
  const float sum_hi = l.hi + w.sSum[(1 - w.wg) * 256 + 2 * w.tw + 1];
  bad = (w.sBadWg[0] | w.sBadWg[1]) != 0;
  const bool whole = s.seq_pieces[b] == 1;
  const int slot = whole ? 0 : mla_piece_slot(s, part, b);
  const int q = w.lane % 4;  // the lane's place in its quad (the four lanes of a row)
  // (a quad's lanes share their rows: their sums, maxima and so factors are the same bits)
  const bool live_lo = w.row0 + w.r_lo < w.rows_per_b, live_hi = w.row0 + w.r_hi < w.rows_per_b;
  const MlaRowFactor f_lo = mla_row_factor(sum_lo, w.out_scale, bad);
  const MlaRowFactor f_hi = mla_row_factor(sum_hi, w.out_scale, bad);
  // A row that saw no key (keep 0: an empty sequence or piece, a causal row before its first key)
  // has its o zeroed here, in a branch a warp takes only when it holds one: its inv is then 0 and
  // o x inv = +0, mla_row_output's value, so the stores below multiply alone (no AND a value).
  if (gpu::any((f_lo.keep & f_hi.keep) == 0u)) {
#pragma unroll
    for (int i = 0; i < 128; ++i) {
      if (((i % 4) < 2 ? f_lo.keep : f_hi.keep) == 0u) o[i] = 0.f;
    }
  }
  // A lane holds columns 8 j + 2 q and + 1 of its rows (j = 0..31, of its warpgroup's 256), o[4 j
  // + 2 half] and + 1 (half 0: row r_lo, 1: r_hi).
  if (whole) {
    // Lanes q and q ^ 1 swap a word per two j (one shuffle, three selects): the even one keeps j =
    // 2 jp's pair and takes its partner's, the odd one the same for j = 2 jp + 1, so each lane
    // stores four consecutive columns (8 bytes) and a quad's store covers a row's 32-byte sector.
    // (NOTES item 55 c's 4 x 4 transpose to 16-byte stores took twice the instructions a value,
    // and nvcc 13.0 split those stores into 4-byte ones.)
    const bool odd = q & 1;
    T* out = static_cast<T*>(w.p.out) + (int64_t(b) * w.rows_per_b + w.row0) * kMlaLatentDim + 256 * w.wg + 8 * odd +
             4 * (q >> 1);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float inv = half ? f_hi.inv : f_lo.inv;
      const bool live = half ? live_hi : live_lo;  // (every lane takes part in the shuffles)
      T* dst = out + (half ? w.r_hi : w.r_lo) * kMlaLatentDim;
#pragma unroll
      for (int jp = 0; jp < 16; ++jp) {  // columns 16 jp .. 16 jp + 15
        const uint32_t w0 = pack2<T>(o[8 * jp + 2 * half] * inv, o[8 * jp + 2 * half + 1] * inv);
        const uint32_t w1 = pack2<T>(o[8 * jp + 4 + 2 * half] * inv, o[8 * jp + 4 + 2 * half + 1] * inv);
        const uint32_t got = gpu::shfl_xor(odd ? w0 : w1, 1);
        if (live) *reinterpret_cast<uint2*>(dst + 16 * jp) = odd ? make_uint2(got, w1) : make_uint2(w0, got);
      }
    }
  } else {
    // Float pairs as they are: a quad's 8-byte stores already cover a row's 32-byte sector.
    float* out = ws_out + (int64_t(slot) * w.rows_per_b + w.row0) * kMlaLatentDim + 256 * w.wg + 2 * q;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (!(half ? live_hi : live_lo)) continue;
      const float inv = half ? f_hi.inv : f_lo.inv;
      float* dst = out + (half ? w.r_hi : w.r_lo) * kMlaLatentDim;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
      }
    }
  }
  // Each row's lse once: lane 0 of a quad in warpgroup 0 for row r_lo, lane 1 for r_hi.
  if (w.wg == 0 && q < 2) {
    const bool hi = q == 1;
    const int r = hi ? w.r_hi : w.r_lo;
    if (w.row0 + r < w.rows_per_b) {
      float* lse = whole ? w.p.lse + int64_t(b) * w.rows_per_b : ws_lse + int64_t(slot) * w.rows_per_b;
      lse[w.row0 + r] = mla_row_lse(hi ? m.hi : m.lo, hi ? sum_hi : sum_lo, bad);
    }
  }
}
#endif

}  // namespace jaxpaged
