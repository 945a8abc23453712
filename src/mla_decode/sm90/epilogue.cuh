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
// the rows' outputs; bad: a page id of this warpgroup's tiles was out of range (the whole
// sequence then comes out NaN).
// kAnyBarrier: the warpgroups run different code (the split schedule), so they meet at a
// non-.aligned barrier.
template <typename T, typename W, bool kAnyBarrier = false>
__device__ __forceinline__ void mla_store_sequence(const W& w, const MlaSchedule& s,
                                                   int part, int b, MlaRowPair& l, const MlaRowPair& m,
                                                   const float (&o)[128], bool& bad, float* __restrict__ ws_out,
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
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = half ? w.r_hi : w.r_lo;
    // (a quad's lanes share their rows, and every lane takes part in the exchanges below)
    const bool live = w.row0 + r < w.rows_per_b;
    const float sum = half ? sum_hi : sum_lo;
    const MlaRowFactor f = mla_row_factor(sum, w.out_scale, bad);
    const int64_t row = int64_t(b) * w.rows_per_b + w.row0 + r;
    const int64_t ws_row = int64_t(slot) * w.rows_per_b + w.row0 + r;
    // A lane holds columns 8 j + 2 q and + 1 of its rows (j = 0..31, of its warpgroup's 256).
    // Written as they are, a warp's store covers 16 bytes (bf16) or 32 (float) of each of 8
    // rows; the quad first exchanges values so that each store covers 64 contiguous bytes of a
    // row in 16 bytes a lane (whole 32-byte sectors, a quarter or half the store instructions).
    if (whole) {
      T* dst = static_cast<T*>(w.p.out) + row * kMlaLatentDim + 256 * w.wg;
#pragma unroll
      for (int jg = 0; jg < 8; ++jg) {  // columns 32 jg .. 32 jg + 31
        uint32_t v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int j = 4 * jg + k;
          v[k] = pack2<T>(mla_row_output(o[4 * j + 2 * half], f), mla_row_output(o[4 * j + 2 * half + 1], f));
        }
        quad_transpose4(v, q);  // now columns 8 (4 jg + q) .. + 7
        if (live) *reinterpret_cast<uint4*>(dst + 8 * (4 * jg + q)) = make_uint4(v[0], v[1], v[2], v[3]);
      }
    } else {
      float* dst = ws_out + ws_row * kMlaLatentDim + 256 * w.wg;
      const bool odd = q & 1;
#pragma unroll
      for (int jp = 0; jp < 16; ++jp) {  // columns 16 jp .. 16 jp + 15 (j = 2 jp, 2 jp + 1)
        const float2 e0 = make_float2(mla_row_output(o[8 * jp + 2 * half], f),
                                      mla_row_output(o[8 * jp + 2 * half + 1], f));
        const float2 e1 = make_float2(mla_row_output(o[8 * jp + 4 + 2 * half], f),
                                      mla_row_output(o[8 * jp + 4 + 2 * half + 1], f));
        // Lanes q and q ^ 1 swap: the even one keeps j = 2 jp's pair and takes its partner's,
        // the odd one the same for j = 2 jp + 1 - four consecutive columns each.
        const float2 send = odd ? e0 : e1;
        const float2 got = make_float2(gpu::shfl_xor(send.x, 1), gpu::shfl_xor(send.y, 1));
        const float4 val = odd ? make_float4(got.x, got.y, e1.x, e1.y) : make_float4(e0.x, e0.y, got.x, got.y);
        if (live) *reinterpret_cast<float4*>(dst + 8 * (2 * jp + odd) + 4 * (q >> 1)) = val;
      }
    }
    if (live && w.wg == 0 && q == 0) {
      const float mrow = half ? m.hi : m.lo;
      const float lse = mla_row_lse(mrow, sum, bad);
      if (whole) w.p.lse[row] = lse;
      else ws_lse[ws_row] = lse;
    }
  }
}
#endif

}  // namespace jaxpaged
