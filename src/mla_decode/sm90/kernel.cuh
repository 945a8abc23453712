// MLA decode on Hopper warpgroup tensor cores (wgmma; built for sm_90a only), warp-specialized.
// This file is the kernel and its compute schedule; its parts by role: layout.cuh (shared memory,
// register budgets), loader.cuh (the loader warpgroup), compute.cuh (the compute warpgroups'
// operations), epilogue.cuh (a sequence's output).
//
// Block = 64 query rows (of one sequence's s_q x Hq) x one partition of the KV work
// (partition_schedule.cuh); 384 threads = three warpgroups (below: the seesaw schedule of 16-bit
// and fp8 caches; 656-byte rows run the split schedule instead, mla_split_compute, fed by
// mla_load_tiles_ds_regs):
//   warpgroup 2 (loader): streams the partition's keys in 64-token tiles (576 wide) into two
//     shared-memory tile buffers, page ids a pair ahead: with pages of >= 64 tokens one thread
//     issues a TMA box per 64-column block (kTma), else 128 threads issue 16-byte cp.async
//     copies (a small page's tile gathers rows from several pages). Each buffer is split into
//     three column groups - L (columns 0-255), R (256-511) and the rope block (512-575) - with a
//     "full" and an "empty" mbarrier each, because the groups fall free at different times: the
//     loader refills them in the order they fall free (mla_group_in_order), each as soon as its
//     last reader is done, not when the whole tile is.
//   warpgroups 0 and 1 (compute): take the tiles in pairs (t0 in buffer 0, t1 in buffer 1) and
//     split the work "seesaw" fashion so both do the same amount and one's softmax overlaps the
//     other's products (the schedule of FlashMLA's Hopper decode kernel):
//       WG0: S0 = Q K0^T; m0 = running max with S0; P0 = exp(S0 - m0); O_L += P0 V0_L
//       WG1: S1 = Q K1^T; m1 = max(m0, rowmax S1); P1 = exp(S1 - m1); O_R += P1 V1_R
//       WG0: P0 brought to m1 for WG1; O_L to m1; O_L += P1 V1_L    (P1 read from shared memory)
//       WG1: O_R += P0 V0_R                                          (P0 read from shared memory)
//     and each issues the S of its next tile once its last product of the pair is done and its
//     groups are handed back (WG0 blocking on the next S0's refills before releasing buffer 1's
//     L and rope held up WG1's next S1; NOTES item 27), so the tensor cores have queued work
//     while the warpgroups do softmax. A tile's P is written over
//     its rope block (only S reads it). Each compute warpgroup keeps its 256 output columns in
//     registers (128 floats per thread).
// Tiles are stored with the 128-byte swizzle, so each is at once the K operand (K-major) of
// S = Q K^T and the V operand (MN-major, its first 512 columns) of O = P V; a P tile (64 x 64) is
// a K-major A operand in the same format. The rows' queries (512 latent + 64 rope) stay in shared
// memory (with kTma the loader thread brings them by TMA, else the compute warpgroups copy them);
// S reads both operands from there. S is a 64 x 64 product per tile (m64n64k16): with N
// = 64 every 16-column step reads 2 KiB of Q and 2 KiB of K, the rate the tensor cores consume
// them (N = 32 read Q twice as often and was bound by shared-memory bandwidth; NOTES item 14).
// Keys past kv_len or past a causal row's last key get probability 0, and their K/V bytes are
// zero-filled (0 * garbage must not reach a product); rows past the sequence's s_q x Hq read zero
// queries and are never stored.
#pragma once

#include "common/gpu_math.cuh"
#include "common/pdl.cuh"
#include "common/masking.h"
#include "common/sm90/mbarrier.cuh"
#include "common/sm90/wgmma.cuh"
#include "mla_decode/params.h"
#include "mla_decode/partition_schedule.cuh"
#include "mla_decode/sm90/compute.cuh"
#include "mla_decode/sm90/epilogue.cuh"
#include "mla_decode/sm90/layout.cuh"
#include "mla_decode/sm90/loader.cuh"
#include "mla_decode/sm90/tma_maps.h"
#include "mla_decode/sm90/trace.cuh"

namespace jaxpaged {

#if defined(JP_HAVE_WGMMA)
// The split schedule's compute warpgroups (656-byte rows; FlashMLA's sparse decode's division of
// work, NOTES item 51), one role per instance (kRole = the warpgroup): warpgroup 0 runs every
// tile's S, its softmax and O_L += P V_L (P from registers), hands P (over the tile's rope block)
// and the rows' rescale factors to warpgroup 1, and issues the next tile's S before waiting for
// its P V_L; warpgroup 1 runs O_R += P V_R (P from shared memory) for the tile warpgroup 0 handed
// over, so its product overlaps warpgroup 0's next S. Warpgroup 0 releases a tile's L, warpgroup
// 1 its R and rope (P was there); S reads L, R, rope, the order the loader refills them
// (mla_load_tiles_ds_regs). Warpgroup 1 keeps no maxima or sums: its O half follows warpgroup
// 0's maxima through the factors, and its share of the row sums in the epilogue is 0. The
// factors go through sMax[buffer][thread][2]: warpgroup 0 writes a buffer's after the S of its
// tile, which waited for the loader's refill of that buffer's rope, which waited for warpgroup 1's
// release of the buffer's previous tile - so no factor is overwritten before it is read. The
// roles meet at barriers from different code: the non-.aligned forms (named_barrier_sync_any).
template <typename T, bool kTma, bool kSparse, int kFmt, int kRole>
__device__ __forceinline__ void mla_split_compute(const MlaDecodeParams& p, const MlaSchedule& s, const MlaWgShared& sh,
                                                  int part, int first_b, int last_b, int64_t capacity, int tid, int tw,
                                                  int lane, int rows_per_b, int row0, int ld_chunk,
                                                  float* __restrict__ ws_out, float* __restrict__ ws_lse) {
  using W = MlaComputeWarpgroup<T, kTma, kSparse, kFmt>;
  W w(p, sh, kRole, tw, lane, rows_per_b, row0, ld_chunk);
  int uses[2] = {0, 0};      // tiles consumed from each buffer so far (mirrors the loader)
  bool q_in_flight = false;  // warpgroup 0 already issued this sequence's queries
  for (int b = first_b; b <= last_b; ++b) {
    const int kv_len = mla_kv_len<kSparse>(p, b, capacity);
    const TileSpan tiles = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
    w.template land_queries<true>(b, tid, q_in_flight);
    q_in_flight = tiles.begin < tiles.end && b < last_b;
    const MlaRowEnds ends = mla_row_ends<kSparse>(p, kv_len, row0, rows_per_b, w.r_lo, w.r_hi);
    MlaRowPair m{-INFINITY, -INFINITY};
    MlaRowPair l{0.f, 0.f};
    bool bad = false;
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;
    w.settle_o(o);  // (zeroed once: the seesaw schedule's note below)
    float sacc[32];
    if constexpr (kRole == 0) {
#pragma unroll
      for (int i = 0; i < 32; ++i) sacc[i] = 0.f;
      if (tiles.begin < tiles.end) bad |= w.issue_scores(sacc, 0, uses[0] & 1);
    }
    for (int u = tiles.begin; u < tiles.end; u += 2) {
      const bool has1 = u + 1 < tiles.end;
      const uint32_t par1 = uses[1] & 1;  // tile u + 1's full phase
      ++uses[0];
      if (has1) ++uses[1];
#pragma unroll
      for (int buf = 0; buf < 2; ++buf) {
        if (buf == 1 && !has1) break;
        const int t = u + buf;
        float* factors = sh.sMax + buf * 256 + 2 * tw;
        if constexpr (kRole == 0) {
          uint32_t pa[16];
          w.wait_scores(sacc);
          const MlaRowPair m1 = w.max_of(m, w.tile_max(sacc, t, ends.needs_mask(t), ends.lo, ends.hi, buf));
          const MlaRowPair sum = w.probabilities(sacc, m1, pa);
          const MlaRowPair c = w.rescale(m, m1);
          l = {l.lo * c.lo + sum.lo, l.hi * c.hi + sum.hi};
          m = m1;
          w.store_p(buf, pa);  // over the tile's rope block: its S is done with it
          factors[0] = c.lo;
          factors[1] = c.hi;
          named_barrier_arrive_any(kMlaBarSplitP + buf, kMlaComputeThreads);
          w.scale_o(o, c);
#pragma unroll
          for (int i = 0; i < 16; ++i) reg_fence(pa[i]);
          wgmma_fence();
          w.pv_from_regs(o, pa, buf);  // O_L += P V_L
          wgmma_commit();
          // The next tile's S goes in behind it (buffer 1, or the next pair's buffer 0).
          const bool next = buf == 0 ? has1 : u + 2 < tiles.end;
          if (next) {
            bad |= w.issue_scores(sacc, 1 - buf, buf == 0 ? par1 : uses[0] & 1);
            wgmma_wait<1>();  // (the P V_L; the S may still run)
          } else {
            wgmma_wait<0>();
          }
          w.settle_o(o);
          w.release(buf, kGroupL);
        } else {
          // P and the factors are in. (This warpgroup never waits on the tile's full barriers:
          // warpgroup 0 waited on all three groups, L, R and rope, before its S, which precedes its
          // arrival here.)
          named_barrier_sync_any(kMlaBarSplitP + buf, kMlaComputeThreads);
          w.scale_o(o, MlaRowPair{factors[0], factors[1]});
          wgmma_fence();
          w.pv_from_smem(o, buf);  // O_R += P V_R
          wgmma_commit();
          wgmma_wait<0>();
          w.settle_o(o);
          w.release(buf, kGroupR);
          w.release(buf, kGroupRope);
        }
      }
    }
    if constexpr (kRole == 0) {
      // No S is in flight past the last tile, but the compiler cannot tell: drain, so that the
      // next sequence's writes of sacc are not inside a wgmma stage (ptxas would serialize every
      // wgmma of the kernel).
      w.wait_scores(sacc);
      // Its last S is done: the next sequence's queries, behind the epilogue.
      if (q_in_flight) w.load_queries(b + 1, tw, 128);
    }
    mla_store_sequence<T, W, true>(w, s, part, b, l, m, o, bad, ws_out, ws_lse);
  }
}
#endif

// kTma: the loader is one thread issuing a TMA box per column block (pages of >= 64 tokens: a
// tile is a 64-row slice of one page); otherwise 128 threads gather rows (loader.cuh). kSparse:
// sequences are sparse index lists (MlaDecodeParams::indices; gathered). kFmt: the cache format
// (params.h; quantized ones gathered raw and converted by the loader: mla_load_tiles_quantized).
template <typename T, bool kTma, bool kSparse, int kFmt>
__global__ void __launch_bounds__(kMlaWgThreads, 1)
    mla_wgmma_kernel(const MlaDecodeParams p, int page_shift, int row_blocks, const MlaSchedule s,
                     float* __restrict__ ws_out, float* __restrict__ ws_lse,
                     const __grid_constant__ MlaTmaMaps maps) {
#if defined(JP_HAVE_WGMMA)
  // A dependent launch of this call's schedule kernel (p.dependent_attention; else a plain
  // launch, and this wait does nothing): wait for it, then (p.early_dependents) let the merge
  // after this one launch - its blocks wait for this grid before reading its partial results;
  // launched now, they occupy only SMs this grid leaves idle (one block per SM; the grid fills at
  // most the SMs when there are more partitions than row blocks), those with nothing to merge exit
  // there, and the rest are ready when it ends. The merge reads the schedule before its wait, so
  // nothing here may trigger or exit before this wait (schedule.cu).
  pdl_wait();
  if (p.early_dependents) pdl_launch_dependents();
  extern __shared__ unsigned char smem_raw[];
  const MlaWgShared sh(smem_raw);

  const int tid = threadIdx.x, tw = tid % 128, lane = tid % 32;
  // Through a shuffle so the compiler knows it is the same in a warp (wgmma under branches on it
  // would otherwise be serialized).
  const int wg = gpu::shfl(tid / 128, 0);
  const int part = blockIdx.x / row_blocks, rb = blockIdx.x % row_blocks;
  // (clamped to the batch: a plan passed in is data the caller could have altered)
  const int first_b = max(s.part_first[part], 0), last_b = min(s.part_last[part], int(p.batch) - 1);
  // 32-bit rows and token positions (kv_lens are int32) keep register pressure down.
  const int rows_per_b = int(p.s_q * p.num_heads);
  const int row0 = rb * kMlaWgRows;
  const int64_t capacity = p.max_pages * p.page_size;
  // Eight consecutive threads fill one 128-byte row (chunk ld_chunk), so global reads coalesce
  // and the swizzled stores hit eight bank groups.
  const int ld_chunk = tid % 8;

  if (tid == 0) {
    for (int i = 0; i < 2 * kGroups; ++i) {
      // cp.async: each loader thread's copies landed + a plain arrival from it; TMA: the one
      // thread's arrival, which also names the bytes to wait for; quantized caches: each
      // converting warp's arrival, and on `landed` the issuing warp's lanes as cp.async's above.
      mbar_init(&sh.full[i], kTma ? 1
                                  : (kFmt == kMlaDsRows ? kMlaDsRegsWarps
                                                        : (kFmt != kMlaSame ? kMlaConverterWarps : 2 * 128)));
      mbar_init(&sh.empty[i], 4);  // each warp of the one warpgroup that reads the group last
      mbar_init(&sh.landed[i], 2 * 32);
    }
    for (int i = 0; i < 8; ++i) sh.sBadPage[i] = 0;  // (the TMA loader writes only each buffer's first)
    mbar_init(sh.q_full, 1);   // (kTma) the loader's arrival, naming the queries' bytes
    mbar_init(sh.q_empty, 1);  // (kTma) warpgroup 0's, after a sequence's last S
    fence_proxy_async_shared();  // the barriers, for the copy engine's arrivals
  }
  __syncthreads();

  if (wg == 2) {  // the loader warpgroup
    warpgroup_regs_shrink<MlaWgRegs<kTma, kFmt>::kLoader>();
    if constexpr (kTma) {
      if (tw == 0) mla_load_tiles_tma(p, page_shift, s, part, first_b, last_b, capacity, maps, sh, row0);
    } else if constexpr (kFmt == kMlaDsRows) {
      mla_load_tiles_ds_regs<T, kSparse>(p, page_shift, s, part, first_b, last_b, capacity, sh, tw, lane);
    } else if constexpr (kFmt != kMlaSame) {
      mla_load_tiles_quantized<T, kSparse, kFmt>(p, page_shift, s, part, first_b, last_b, capacity, sh, tw, lane);
    } else {
      mla_load_tiles_gather<T, kSparse>(p, page_shift, s, part, first_b, last_b, capacity, sh, tw, lane, ld_chunk);
    }
    return;
  }

  // The compute warpgroups.
  using Regs = MlaWgRegs<kTma, kFmt>;
  using W = MlaComputeWarpgroup<T, kTma, kSparse, kFmt>;
  if constexpr (Regs::kSplit) {
    // Each role's whole loop in its own branch after its register budget (code after a merge
    // would be held to the smaller budget).
    if (wg == 0) {
      warpgroup_regs_grow<Regs::kSplitS>();
      mla_split_compute<T, kTma, kSparse, kFmt, 0>(p, s, sh, part, first_b, last_b, capacity, tid, tw, lane, rows_per_b,
                                                   row0, ld_chunk, ws_out, ws_lse);
    } else {
      warpgroup_regs_shrink<Regs::kSplitPv>();
      mla_split_compute<T, kTma, kSparse, kFmt, 1>(p, s, sh, part, first_b, last_b, capacity, tid, tw, lane, rows_per_b,
                                                   row0, ld_chunk, ws_out, ws_lse);
    }
  } else {  // the seesaw schedule (the header above)
    warpgroup_regs_grow<Regs::kCompute>();
    W w(p, sh, wg, tw, lane, rows_per_b, row0, ld_chunk);
    MlaTrace tr(p, wg);  // (the timeline probe's marks: nothing outside tools/mla_trace.cu's build)
    tr(50);
    int uses[2] = {0, 0};      // tiles consumed from each buffer so far (mirrors the loader)
    bool q_in_flight = false;  // warpgroup 0 already issued this sequence's queries (see below)
    for (int b = first_b; b <= last_b; ++b) {
      const int kv_len = mla_kv_len<kSparse>(p, b, capacity);
      const TileSpan tiles = mla_piece_tiles(s, part, b, mla_tiles_of(kv_len));
      tr(51);
      if constexpr (kTma) {  // the loader's (loader.cuh); the meet: both are done with the last sequence
        W::template meet<false>();
        mbar_wait(sh.q_full, (b - first_b) & 1);
      } else {
        w.template land_queries<false>(b, tid, q_in_flight);
      }
      tr(52);
      if constexpr (W::kQueriesToHalf) {  // fp8 caches, bf16 queries: the queries as half (layout.cuh)
        w.convert_queries();
        fence_proxy_async_shared();
        W::template meet<false>();
      }
      // Warpgroup 0 fetches the next sequence's queries before this one's epilogue (below).
      q_in_flight = tiles.begin < tiles.end && b < last_b;
      const MlaRowEnds ends = mla_row_ends<kSparse>(p, kv_len, row0, rows_per_b, w.r_lo, w.r_hi);
      MlaRowPair m{-INFINITY, -INFINITY};  // running max (log2 domain) at the start of a pair
      MlaRowPair l{0.f, 0.f};              // this thread's share of the running sums
      bool bad = false;                    // a page id of this warpgroup's tiles was out of range
      float o[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) o[i] = 0.f;
      // (zeros as values, not constants: else ptxas zeroed o twice on a sequence's way into the
      // pair loop - 128 moves, then 64 CS2R - 3 KB of once-a-sequence code)
      w.settle_o(o);
      float sacc[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) sacc[i] = 0.f;

      // Each warpgroup's first S; later ones are issued at the end of the previous pair.
      if (tiles.begin + wg < tiles.end) {
        // (buffer index as a constant in each branch: the group order depends on it)
        if (wg == 0) bad |= w.issue_scores(sacc, 0, uses[0] & 1);
        else bad |= w.issue_scores(sacc, 1, uses[1] & 1);
        w.wait_scores(sacc);
      }
      for (int u = tiles.begin; u < tiles.end; u += 2) {
        const bool has1 = u + 1 < tiles.end;
        const bool next0 = u + 2 < tiles.end, next1 = u + 3 < tiles.end;  // the next pair's tiles
        ++uses[0];
        if (has1) ++uses[1];
        uint32_t pa[16];  // this warpgroup's P as A fragments
        if (wg == 0) {
          tr(1);
          const MlaRowPair m0 = w.max_of(m, w.tile_max(sacc, u, ends.needs_mask(u), ends.lo, ends.hi, 0));
          const MlaRowPair sum = w.probabilities(sacc, m0, pa);
          w.publish_max(m0, kMlaBarM0);
          tr(2);
          const MlaRowPair c = w.rescale(m, m0);
          l = {l.lo * c.lo + sum.lo, l.hi * c.hi + sum.hi};
          w.scale_o(o, c);
#pragma unroll
          for (int i = 0; i < 16; ++i) reg_fence(pa[i]);
          w.zero_v_tail(0, u, kv_len);
          tr(11);
          wgmma_fence();
          tr(12);
          w.pv_from_regs(o, pa, 0);  // O_L += P0 V0_L
          wgmma_commit();
          tr(3);
          wgmma_wait<0>();
          w.settle_o(o);
          tr(4);
          w.release(0, kGroupL);
          named_barrier_sync(kMlaBarP1, kMlaComputeThreads);  // warpgroup 1 published m1 and P1
          tr(5);
          const MlaRowPair m1{w.peer_max[0], w.peer_max[1]};
          const MlaRowPair c1 = w.rescale(m0, m1);
          // P0 was made against m0; warpgroup 1 adds it to O_R, which is at m1.
          if (gpu::any(c1.lo != 1.f || c1.hi != 1.f)) {
#pragma unroll
            for (int i = 0; i < 16; ++i) pa[i] = scale_pack2<typename W::Tc>(pa[i], (i % 2) == 0 ? c1.lo : c1.hi);
          }
          tr(13);
          w.store_p(0, pa);  // over K0's rope block: S0 is done with it
          named_barrier_arrive(kMlaBarP0, kMlaComputeThreads);
          tr(6);
          l = {l.lo * c1.lo, l.hi * c1.hi};
          w.scale_o(o, c1);
          if (has1) {
            w.zero_v_tail(1, u + 1, kv_len);  // (warpgroup 1's S1 is done with it)
            wgmma_fence();
            w.pv_from_smem(o, 1);  // O_L += P1 V1_L
            wgmma_commit();
            tr(7);
            // Buffer 1's L and rope go back to the loader before this warpgroup may block on the
            // next S0's refills: warpgroup 1's next S1 waits on them.
            wgmma_wait<0>();
            w.settle_o(o);
            tr(8);
            w.release(1, kGroupL);
            w.release(1, kGroupRope);  // P1 was there
          }
          if (next0) bad |= w.issue_scores(sacc, 0, uses[0] & 1);
          tr(9);
          w.wait_scores(sacc);
          tr(10);
          m = m1;
        } else {
          tr(21);
          MlaRowPair mx{-INFINITY, -INFINITY};
          if (has1) mx = w.tile_max(sacc, u + 1, ends.needs_mask(u + 1), ends.lo, ends.hi, 1);
          tr(22);
          named_barrier_sync(kMlaBarM0, kMlaComputeThreads);  // warpgroup 0 published m0
          tr(23);
          const MlaRowPair m1 = w.max_of(MlaRowPair{w.peer_max[0], w.peer_max[1]}, mx);
          MlaRowPair sum{0.f, 0.f};
          if (has1) {
            sum = w.probabilities(sacc, m1, pa);
            w.store_p(1, pa);  // over K1's rope block: S1 is done with it
          }
          w.publish_max(m1, kMlaBarP1);
          tr(24);
          const MlaRowPair c = w.rescale(m, m1);
          l = {l.lo * c.lo + sum.lo, l.hi * c.hi + sum.hi};
          w.scale_o(o, c);
          if (has1) {
#pragma unroll
            for (int i = 0; i < 16; ++i) reg_fence(pa[i]);
            w.zero_v_tail(1, u + 1, kv_len);
            wgmma_fence();
            w.pv_from_regs(o, pa, 1);  // O_R += P1 V1_R
            wgmma_commit();
          }
          tr(25);
          named_barrier_sync(kMlaBarP0, kMlaComputeThreads);  // warpgroup 0 stored P0 at m1
          tr(26);
          w.zero_v_tail(0, u, kv_len);                    // (warpgroup 0's S0 is done with it)
          wgmma_fence();
          tr(32);
          w.pv_from_smem(o, 0);  // O_R += P0 V0_R
          wgmma_commit();
          tr(27);
          if (has1) {
            wgmma_wait<1>();
            tr(28);
            w.release(1, kGroupR);
          }
          wgmma_wait<0>();
          w.settle_o(o);
          tr(29);
          w.release(0, kGroupR);
          w.release(0, kGroupRope);  // P0 was there
          if (next1) {
            bad |= w.issue_scores(sacc, 1, uses[1] & 1);
            tr(30);
            w.wait_scores(sacc);
            tr(31);
          }
          m = m1;
        }
      }

      // Warpgroup 0 passed the last pair's P1 barrier, so both warpgroups' last S is done: fetch
      // the next sequence's queries now, behind the epilogue (inside the pair loop the address
      // math made the compute warpgroups spill); with TMA, let the loader fetch them.
      if constexpr (kTma) {
        if (wg == 0 && tw == 0 && b < last_b) mbar_arrive(sh.q_empty);
      } else {
        if (wg == 0 && q_in_flight) w.load_queries(b + 1, tw, 128);
      }

      // Epilogue: the row sums are the two warpgroups' shares (both against the same final max);
      // a corrupt page seen by either warpgroup poisons the whole sequence.
      tr(53);
      mla_store_sequence<T>(w, s, part, b, l, m, o, bad, ws_out, ws_lse);
      tr(54);
    }
  }
#endif
}

}  // namespace jaxpaged
