// Paged attention on tensor cores (mma.sync m16n8k16; sm_80 and sm_90): one kernel for decode
// tokens and prefill chunks alike.
//
// The query rows of one sequence and one KV head are the (token, head-of-the-GQA-group) pairs of its
// query chunk, ordered token-major; a *tile* is 16 or 64 consecutive such rows, and a thread block
// (4 warps) attends one tile over its sequence's visible keys (or one KV split of them). So each
// K/V byte a block reads serves every query head that shares it.
//   small tile (16 rows, decode: up to 16 heads x tokens): the 4 warps share the rows and split
//       each stage's keys 16 per warp, each warp with its own online softmax; with D = 256 (32-key
//       stages) two warps take each 16 keys and split the output columns. They merge through
//       shared memory at the end.
//   large tile (64 rows, prefill chunks): each warp owns 16 rows and sweeps all keys of a stage
//       (FlashAttention-2 style).
// K/V stages (64 keys; 32 for D = 256) stream through shared memory with cp.async, STAGES deep,
// and page ids are read a stage ahead so the table lookup never sits in front of a load.
// A pure-decode call with a GQA group of at most 16 has only small tiles: it runs the instance
// without the large path (LARGE = false), whose query buffer is 16 rows, not 64. Shared memory is XOR
// swizzled (16-byte chunk c of row r lives at chunk c ^ (r % 8)), which keeps ldmatrix free of bank
// conflicts without padding. S = Q K^T and P V run on tensor cores; P stays in registers (the
// accumulator fragment of S is the A fragment of P V).
//
// fp8 caches (FP8 instances): the stages land as fp8 bytes (one more stage deep, as each is half
// the size), and each is converted into one 16-bit K/V buffer in the swizzled layout (common/
// fp8.cuh: exact) between two barriers, so the math above runs unchanged; k_scale folds into the
// score multiplier and v_scale into the output.
//
// Which keys a row sees is masking.h's rule; keys outside [k_begin, k_end) or past the end of the
// sequence are zero-filled by cp.async and get probability 0, so junk in unused pages never reaches
// a product. An out-of-range page id is never read: its keys are zero-filled and marked in a
// per-stage bit mask (one bit per key), and a row that sees a marked key gets NaN output and lse,
// as in the reference (rows of the same tile that do not see it are unaffected).
#pragma once

#include <type_traits>

#include "common/fp8.cuh"
#include "common/gpu_math.cuh"
#include "common/pdl.cuh"
#include "common/masking.h"
#include "common/sm80/mma.cuh"
#include "paged_attention/length_order.cuh"
#include "paged_attention/params.h"
#include "paged_attention/workspace.h"  // tile shapes

namespace jaxpaged {

constexpr int kTileThreads = 128;

// Shared memory per block: the queries, STAGES x (K + V) stages of kKeys keys, their page ids;
// with an fp8 cache, first the one 16-bit K + V buffer the stages are converted into.
// Sized so two blocks fit on an SM (three for D = 64), with 64-96 KiB of K/V in flight per block
// (48-64 KiB of fp8), and within an A100's 164 KiB.
//
// DTR: the decode-transposed instance (pure decode with GQA groups of <= 8 over an fp8 cache: every
// tile TR on raw stages, nothing else compiled): no converted buffer, D = 128 a stage fewer, and
// __launch_bounds__ asking for kMinBlocks blocks an SM (registers capped to fit them).
template <int D, bool LARGE, bool FP8 = false, bool DTR = false>
struct TileConfig {
  static_assert(!DTR || (FP8 && !LARGE), "the decode-transposed instance: small fp8 tiles");
  static constexpr int kKeys = D == 256 ? 32 : 64;  // keys per stage
  static constexpr int kStages =
      DTR && D == 128 ? 3 : (D == 64 ? 4 : ((D == 256 && LARGE) ? 2 : 3)) + (FP8 ? 1 : 0);
  // Blocks an SM the instance is built for (registers <= 65536 / (128 x this); shared memory fits).
  static constexpr int kMinBlocks = DTR ? (D == 64 ? 5 : (D == 256 ? 3 : 4)) : 1;
  // MB/s one block streams alone where measured (occupancy_kv_splits; 0: not known): DTR D = 256,
  // 256 blocks unsplit on the H200, 3.28 TB/s (NOTES item 77 c).
  static constexpr int64_t kBlockMbps = DTR && D == 256 ? 12800 : 0;
  static constexpr int kQRows = LARGE ? kLargeRows : kSmallRows;
  static constexpr size_t kKvBytes = FP8 ? 1 : 2;                          // cache element
  static constexpr size_t kStageBytes = size_t(kKeys) * D * 2 * kKvBytes;  // K and V
  // Small tiles over fp8 caches with D = 128 convert fragments in registers (kRegFp8 in
  // attend_tile), so the decode instance needs no converted buffer; the large tiles still do.
  static constexpr bool kRegFp8 = FP8 && D == 128;
  // Small tiles of at most 8 rows over fp8 caches run the transposed products (attend_tile's TR)
  // on the register path's raw stages: D = 128, and D = 64 and 256 (whose other tiles convert
  // stages).
  static constexpr bool kTransposedFp8 = FP8 && (D == 128 || D == 64 || D == 256);
  static constexpr size_t kConvertedBytes =
      FP8 && !DTR && (LARGE || !kRegFp8) ? size_t(kKeys) * D * 2 * 2 : 0;  // 16-bit K + V
  static constexpr size_t kStageRegion = kConvertedBytes + kStages * kStageBytes;
  // Bad-key masks: 64 bits per stage, in kStages + 1 slots (a stage's mask is written while the
  // previous stage's slot is the only one no warp reads).
  static constexpr int kMaskSlots = kStages + 1;
  static constexpr size_t kSmemBytes =
      size_t(kQRows) * D * 2 + kStageRegion + size_t(kStages) * kKeys * 4 + size_t(kMaskSlots) * 8;
  // The small tile's warp merge reuses the stage region: (kKeys / 16) x 16 rows x (D + 2) floats.
  static_assert(kKeys * (D + 2) * 4 <= kStageRegion, "merge buffer must fit the stages");
  // (an H100's 228 KiB an SM, 1 KiB of it reserved a block)
  static_assert(kMinBlocks * (kSmemBytes + 1024) <= 228 * 1024, "kMinBlocks blocks fit an SM's shared memory");
};

// Element offset of 16-byte chunk `c` of row `r` in a swizzled [rows][D] tile.
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

// A V word that ldmatrix loaded transposed from raw fp8 stages holds keys 2q, 2q+1 x dims 2g, 2g+1
// (bytes: key 2q's two dims, then key 2q+1's): its bytes 0 and 2 become the even-dim half2 operand
// (keys 2q, 2q+1 of dim 2g), 1 and 3 the odd-dim one.
template <bool E5M2>
__device__ __forceinline__ void fp8_v_word_to_even_odd(uint32_t w, uint32_t& even, uint32_t& odd) {
  fp8x4_to_half2x2_bits<E5M2>(__byte_perm(w, 0u, 0x3120), even, odd);
}

// One tile of one sequence for one KV head and KV split. WM = warps along rows (1: small tile,
// 4: large tile). FP8: the caches hold fp8 (p.kv_e5m2 says which), scaled by k_scale / v_scale.
// TR: the transposed products of a small tile of at most 8 rows (the register path only; see TR
// below).
template <typename T, int D, bool LARGE, bool FP8, int WM, bool E5M2 = false, bool TR = false, bool DTR = false>
__device__ __forceinline__ void attend_tile(const PagedAttentionParams& p, int page_shift, int seq,
                                            int q_begin, int q_len, int tile, int kv_head,
                                            unsigned char* smem, float* __restrict__ ws_out,
                                            float* __restrict__ ws_lse) {
  using C = TileConfig<D, LARGE, FP8, DTR>;
  using KV = std::conditional_t<FP8, uint8_t, T>;  // cache element
  constexpr int STAGES = C::kStages;
  constexpr int KT = C::kKeys;                         // keys per stage
  constexpr int R = 16 * WM;                          // rows of this tile
  constexpr int WK = WM == 4 ? 1 : KT / 16;    // warps along keys
  constexpr int WD = 4 / (WM * WK);                   // warps along output columns
  constexpr int KW = KT / WK;                  // keys per warp per stage
  constexpr int SUB = (D == 256 && KW > 32) ? 32 : KW;  // keys per softmax step (bounds registers)
  constexpr int CPK = D / 8;                          // 16-byte chunks per 16-bit row
  constexpr int CPK_KV = D * int(sizeof(KV)) / 16;    // 16-byte chunks per cache row
  constexpr int KEYS_PER_PASS = kTileThreads / CPK_KV;
  constexpr int PASSES = KT / KEYS_PER_PASS;
  constexpr int NT = D / WD / 8;                      // 8-column output tiles per warp
  static_assert(WM * WK * WD == 4 && R <= C::kQRows, "4 warps; the tile fits the query buffer");
  // fp8 small tiles with D = 128: the stages stay fp8 bytes (16-byte chunks swizzled like the
  // 16-bit ones) and each warp converts the fragments it loads. ldmatrix on the bytes as b16 pairs
  // gives a lane 4 consecutive bytes of a key row; the queries are stored with their head dims
  // permuted within each 16 (logical 2j+e <- 4j+e, 8+2j+e <- 4j+2+e) so those 4 bytes are exactly
  // the lane's B fragment of S = Q K^T. V is loaded transposed: a lane gets 2 keys x 2 adjacent dims
  // and splits them (even dims, odd dims) into two 8-column tiles of O, whose columns are therefore
  // 16 c + 2 n + parity. No conversion pass, no second barrier per stage, no 16-bit buffer.
  // (TR tiles run on the register path's stages at D = 64 too; the plain register-path math is
  // D = 128's only)
  constexpr bool kRegFp8 = FP8 && WM == 1 && (C::kRegFp8 || TR);
  static_assert(!kRegFp8 || (WD == 1 && (D == 128 || (TR && D == 64))) || (TR && D == 256 && WD == 2),
                "the register path: one warp over all columns (TR at D = 256: two)");
  // The register path with bf16 queries runs its products on f16 tensor cores (M): an fp8 value is
  // an f16 exactly (one cvt per two values, where bf16 needs the f16 widened and packed again: 4),
  // the queries become f16 times a power of two per row (exact: bf16's 8 bits fit f16's 11; the
  // power of two puts the row's largest |q| in [2^14, 2^15) and folds back into the row's score
  // multiplier), P is f16 (<= 1). NOTES item 50 k.
  constexpr bool kF16 = kRegFp8 && std::is_same<T, gpu_bf16>::value;
  using M = std::conditional_t<kF16, gpu_half, T>;  // the products' 16-bit type
  static_assert(!kRegFp8 || std::is_same<M, gpu_half>::value, "the register path multiplies in float16");
  // TR (the register path, a tile of at most 8 rows: decode with GQA groups of <= 8): each warp
  // computes S^T = K Q^T with its 16 keys as M and the 8 rows as N (m16n8k16: half the products of
  // S = Q K^T at M = 16 rows, and Q^T's B fragments stay in registers for the whole tile), keeps
  // the online softmax of its 16 keys as before, turns P^T's accumulator fragments into O^T's B
  // fragments with two movmatrix.trans, and computes O^T = V^T P^T with 16 head dims as M (chunks c
  // and c + 1's even or odd dims, from the same transposed loads and conversions as the plain
  // path). A lane holds keys lane / 4 and + 8 of rows 2 (lane % 4) and + 1; O^T's accumulator n
  // element i: row 2 (lane % 4) + (i & 1), dim 16 (n & ~1) + 16 (i >> 1) + 2 (lane / 4) + (n & 1).
  // tools/fragment_model_fp8.py checks these layouts. NOTES item 74 b. At D = 256 (32-key stages,
  // WD = 2) the two warps of a key group compute the same S^T and softmax and split O^T's columns.
  static_assert(!TR || (kRegFp8 && C::kTransposedFp8 && KW == 16), "the transposed tile: the register path's small tile");
  // Byte offset of 16-byte chunk c of key row `key` in a raw register-path stage: swizzled so that
  // ldmatrix's 8 rows of one chunk hit 8 different 16-byte bank groups (D = 128 and 256: rows of
  // 128 or 256 bytes, chunk c ^ (key % 8); D = 64: rows of 64 bytes, two to 128, chunk
  // c ^ (key / 2 % 4)).
  auto raw_at = [](int key, int c) {
    return key * D + ((D == 64 ? c ^ ((key >> 1) & 3) : c ^ (key & 7)) << 4);
  };
  constexpr int NACC = TR ? D / WD / 16 : NT;  // accumulator tiles (TR: 16 dims x 8 rows each)
  const int split = blockIdx.y, num_splits = gridDim.y;
  const int G = int(p.num_q_heads / p.num_kv_heads);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp % WM, wk = (warp / WM) % WK, wd = warp / (WM * WK);
  const int col0 = wd * (D / WD);  // this warp's first output column

  T* sQ = reinterpret_cast<T*>(smem);
  T* sStage = sQ + C::kQRows * D;  // 16-bit K and V the math reads: the stages, or (FP8) one buffer
  // Stage s: K at sRaw + s * 2 * KT * D, V after it (16-bit and swizzled; fp8: plain [key][D] bytes).
  KV* sRaw = reinterpret_cast<KV*>(reinterpret_cast<unsigned char*>(sStage) + C::kConvertedBytes);

  const int64_t rows_total = int64_t(q_len) * G;
  const int64_t row0 = int64_t(tile) * R;
  const int rows_here = int(rows_total - row0 < R ? rows_total - row0 : R);

  // The tile's rows are token-major, so the first row has the smallest visible begin and the last
  // row the largest end: their union bounds every row's keys.
  const PagedOptions opt = paged_options(p);  // traced options: three loads from the device array
  const int kv_len = int(clamp_kv_len(p.kv_lens[seq], p.max_pages * p.page_size));
  int u_begin = 0, u_end = 0;
  if (rows_here > 0) {
    u_begin = int(visible_keys(kv_len, q_len, row0 / G, opt.sliding_window).begin);
    u_end = int(visible_keys(kv_len, q_len, (row0 + rows_here - 1) / G, opt.sliding_window).end);
  }
  const int n_keys = u_end > u_begin ? u_end - u_begin : 0;
  const int per_split = (n_keys + num_splits - 1) / num_splits;
  const int chunk = (per_split + KT - 1) / KT * KT;  // whole stages per split
  const int k_begin = u_begin + split * chunk;
  const int k_end = min(u_end, k_begin + chunk);
  const int num_tiles = k_end > k_begin ? (k_end - k_begin + KT - 1) / KT : 0;

  // The first stages' page ids (threads < KT: key `tid` of each), loaded here, ahead of the queries
  // and of every shared-memory store that needs them, so the STAGES table reads and the queries'
  // global reads are in flight at once: the chain before the first K/V copy is (after the block's
  // list entry, if it has one) kv_lens, then one round of these - it was kv_lens, the queries, then
  // the STAGES table reads one after another, each stored before the next was issued: six
  // dependent reads (NOTES item 52 g).
  const int32_t* table = p.block_tables + int64_t(seq) * p.max_pages;
  auto lookup = [&](int t) {  // page id of key `tid` of stage t (threads < KT)
    const int j = k_begin + t * KT + tid;
    return j < k_end ? table[j >> page_shift] : 0;
  };
  int first_pages[STAGES];
#pragma unroll
  for (int s = 0; s < STAGES; ++s) first_pages[s] = tid < KT && s < num_tiles ? lookup(s) : 0;

  // Queries of the tile's rows; rows past the chunk read as 0.
  const T* q = static_cast<const T*>(p.q);
  if constexpr (kRegFp8) {  // each 16 head dims permuted (see kRegFp8): through registers
    for (int c = tid; c < R * CPK / 2; c += kTileThreads) {
      const int r = c / (CPK / 2), blk = c % (CPK / 2);
      uint4 lo = make_uint4(0u, 0u, 0u, 0u), hi = lo;
      if (r < rows_here) {
        const int64_t rr = row0 + r;
        const int64_t token = q_begin + rr / G, head = int64_t(kv_head) * G + rr % G;
        const uint4* src = reinterpret_cast<const uint4*>(q + (token * p.num_q_heads + head) * D + blk * 16);
        lo = src[0];
        hi = src[1];
      }
      *reinterpret_cast<uint4*>(sQ + swz<D>(r, 2 * blk)) = make_uint4(lo.x, lo.z, hi.x, hi.z);
      *reinterpret_cast<uint4*>(sQ + swz<D>(r, 2 * blk + 1)) = make_uint4(lo.y, lo.w, hi.y, hi.w);
    }
  } else {
    for (int c = tid; c < R * CPK; c += kTileThreads) {
      const int r = c / CPK, ch = c % CPK;
      const bool live = r < rows_here;
      const int64_t rr = row0 + (live ? r : 0);
      const int64_t token = q_begin + rr / G, head = int64_t(kv_head) * G + rr % G;
      cp_async_16(sQ + swz<D>(r, ch), q + (token * p.num_q_heads + head) * D + ch * 8, live);
    }
  }

  // Each thread copies chunk `my_chunk` of keys my_key0 + i * KEYS_PER_PASS of every stage. The
  // stages' page ids sit in shared memory (one slot per stage, one entry per key), filled by the
  // first KT threads: the table is read a full stage ahead into a register and stored only after
  // the stage's math, so its latency hides behind that math.
  constexpr int CHUNK_ELEMS = 16 / int(sizeof(KV));
  const int my_chunk = tid % CPK_KV, my_key0 = tid / CPK_KV;
  const KV* k_base = static_cast<const KV*>(p.k_cache) + kv_head * p.head_stride + my_chunk * CHUNK_ELEMS;
  const KV* v_base = static_cast<const KV*>(p.v_cache) + kv_head * p.head_stride + my_chunk * CHUNK_ELEMS;
  const int page_mask = int(p.page_size - 1);
  // Each key's cache row, in units of slot_stride from the key's head's row 0 (page x rows_per_page
  // + slot: NHD and HND alike, since page_stride is a multiple of slot_stride), or -1: no key to
  // read (past k_end, or on a bad page). A 32-bit index: the launcher checks that every row of the
  // pool has one (a cache under 2^31 rows of slot_stride elements, i.e. under 256 GiB of 128-byte
  // rows), so a copy's address is one wide multiply instead of two 64-bit products and a 64-bit
  // range check per key and pass (NOTES item 73 g).
  int* sRows = reinterpret_cast<int*>(sRaw + STAGES * 2 * KT * D);  // [STAGES][KT]
  uint32_t* sBadKeys = reinterpret_cast<uint32_t*>(sRows + STAGES * KT);  // [kMaskSlots][2]
  auto bad_id = [&](int page) { return page < 0 || page >= p.num_pages; };
  const int rows_per_page = int(p.page_stride) / int(p.slot_stride);  // (both < 2^31: the launcher)
  // Threads < KT (whole warps): store stage t's rows and its bad-key mask. (The range check sits
  // here, at the end of an iteration, not at the lookup: a use right after the table load would
  // wait for it there, in front of the stage's math.)
  auto publish_pages = [&](int t, int page) {
    const int j = k_begin + t * KT + tid;
    const bool bad = bad_id(page);
    sRows[(t % STAGES) * KT + tid] =
        j < k_end && !bad ? int(uint32_t(page) * uint32_t(rows_per_page) + uint32_t(j & page_mask)) : -1;
    const uint32_t bad_mask = gpu::ballot(bad);
    if (lane == 0) sBadKeys[(t % C::kMaskSlots) * 2 + warp] = bad_mask;
  };
  auto issue_stage = [&](int t) {
    KV* sK = sRaw + (t % STAGES) * 2 * KT * D;
    KV* sV = sK + KT * D;
    const int* rows = sRows + (t % STAGES) * KT;
#pragma unroll
    for (int i = 0; i < PASSES; ++i) {
      const int key = my_key0 + i * KEYS_PER_PASS;
      const int row = rows[key];
      const bool valid = row >= 0;  // (a bad page is marked, not read)
      const uint64_t off = valid ? uint64_t(uint32_t(row)) * uint32_t(p.slot_stride) : 0;
      const int at = kRegFp8 ? raw_at(key, my_chunk) : (FP8 ? key * D + my_chunk * 16 : swz<D>(key, my_chunk));
      cp_async_16(sK + at, k_base + off, valid);
      cp_async_16(sV + at, v_base + off, valid);
    }
  };
  // FP8: stage t's bytes as 16-bit values into the swizzled buffer the math reads. The format is
  // a compile-time constant in each copy of the loop (a run-time flag inside it makes ptxas issue
  // both formats' conversions for every pair of values).
  auto convert_stage_as = [&](int t, auto e5m2_tag) {
    constexpr bool e5m2 = decltype(e5m2_tag)::value;
    const uint8_t* raw = reinterpret_cast<const uint8_t*>(sRaw + (t % STAGES) * 2 * KT * D);
    for (int c = tid; c < 2 * KT * CPK_KV; c += kTileThreads) {  // K's chunks, then V's
      const int kv = c / (KT * CPK_KV), key = (c / CPK_KV) % KT, ch = c % CPK_KV;
      uint4 lo, hi;
      fp8x16_to<T, e5m2 ? 1 : 0>(*reinterpret_cast<const uint4*>(raw + (kv * KT + key) * D + ch * 16), lo, hi, e5m2);
      T* dst = sStage + kv * KT * D;
      *reinterpret_cast<uint4*>(dst + swz<D>(key, 2 * ch)) = lo;
      *reinterpret_cast<uint4*>(dst + swz<D>(key, 2 * ch + 1)) = hi;
    }
  };
  auto convert_stage = [&](int t) {
    if (p.kv_e5m2) convert_stage_as(t, std::true_type{});
    else convert_stage_as(t, std::false_type{});
  };

  if (tid < KT) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) publish_pages(s, first_pages[s]);
  }
  __syncthreads();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) issue_stage(s);
    cp_async_commit();  // group 0 also holds the queries
  }

  // This thread's two rows of its warp's 16 (mma accumulator layout) and the keys each sees,
  // clipped to this split.
  const int r_lo = wm * 16 + lane / 4;
  auto row_of = [&](int h) { return TR ? 2 * (lane & 3) + h : r_lo + 8 * h; };  // this thread's row h
  int vis_b[2], vis_e[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row_of(h);
    vis_b[h] = vis_e[h] = 0;
    if (r < rows_here) {
      const KeyRange kr = visible_keys(kv_len, q_len, (row0 + r) / G, opt.sliding_window);
      vis_b[h] = max(int(kr.begin), k_begin);
      vis_e[h] = min(int(kr.end), k_end);
    }
  }

  // Scores in the log2 domain (softmax by exp2); with a soft cap c, the score becomes
  // c tanh(scale s / c) first (both factors folded into multipliers: no division per score).
  const bool capped = opt.soft_cap > 0.f;
  const float k_mul = FP8 ? opt.k_scale : 1.f;  // a key is k_cache * k_scale
  const float s_mul = capped ? opt.scale * k_mul / opt.soft_cap : opt.scale * k_mul * kLog2e;
  const float cap_mul = opt.soft_cap * kLog2e;
  float s_mul_row[2] = {s_mul, s_mul};  // this thread's two rows' (kF16: times 2^-k of the row)
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  int bad_rows = 0;  // bit h: row h of this thread sees a key on an out-of-range page
  float acc[NACC][4];
#pragma unroll
  for (int n = 0; n < NACC; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  // A raw product as this thread's row h's score of key j: scaled, capped, -inf where the row does
  // not see j.
  auto score = [&](float v, int h, int j) {
    v *= kF16 ? s_mul_row[h] : s_mul;
    if (capped) v = cap_mul * fast_tanh(v);
    return (j >= vis_b[h] && j < vis_e[h]) ? v : -INFINITY;
  };
  // Row h's running maximum after a step whose own maximum (over the row's lanes) is `step_max`;
  // the row sum follows; returns the factor the row's accumulators take.
  auto advance_max = [&](int h, float step_max) {
    const float m_new = fmaxf(m[h], step_max);
    const float corr = m_new == -INFINITY ? 1.f : rescale(m[h], m_new);
    m[h] = m_new;
    l[h] *= corr;
    return corr;
  };

  if constexpr (kF16) {  // the queries (stored above, before its barrier): bf16 -> f16 x 2^k per row
    // Every warp reads the 16 rows (a lane: rows lane / 4 and + 8, dims 32 (lane % 4) ..
    // + 31 - its own two rows, as the accumulator layout gives them) and derives the two
    // rows' k; warp 0 alone writes the converted rows back, between two barriers.
    static_assert(R == 16, "the small tile's 16 rows");
    constexpr int QC = D / 32;  // 16-byte chunks of a row a lane reads (a quad covers the row)
    uint4 qv[2][QC];
    float qmul[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = lane / 4 + 8 * h;
      // The row's largest *finite* |q| as bf16 bits (an inf or NaN element does not count: with
      // an inf beside large finite values, k = 0 would take those past f16's range, and an inf
      // score against a key where the reference has -inf, then inf - inf = NaN).
      uint32_t mb = 0;
#pragma unroll
      for (int i = 0; i < QC; ++i) {
        qv[h][i] = *reinterpret_cast<const uint4*>(sQ + swz<D>(r, QC * (lane % 4) + i));
        const uint32_t w[4] = {qv[h][i].x, qv[h][i].y, qv[h][i].z, qv[h][i].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t lo = w[j] & 0x7FFFu, hi = (w[j] >> 16) & 0x7FFFu;
          mb = max(mb, lo < 0x7F80u ? lo : 0u);
          mb = max(mb, hi < 0x7F80u ? hi : 0u);
        }
      }
      mb = max(mb, gpu::shfl_xor(mb, 1));
      mb = max(mb, gpu::shfl_xor(mb, 2));
      // (an all-zero row keeps k = 0)
      const int k = mb == 0 ? 0 : f16_query_exponent(int((mb >> 7) & 0xFFu));
      qmul[h] = exp2_of(k);
      s_mul_row[h] = s_mul * exp2_of(-k);
    }
    __syncthreads();  // every warp has read the bf16 rows
    if (warp == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = lane / 4 + 8 * h;
#pragma unroll
        for (int i = 0; i < QC; ++i) {
          const uint32_t w[4] = {qv[h][i].x, qv[h][i].y, qv[h][i].z, qv[h][i].w};
          uint32_t o[4];
#pragma unroll
          for (int j = 0; j < 4; ++j)
            o[j] = pack2<gpu_half>(__uint_as_float(w[j] << 16) * qmul[h], __uint_as_float(w[j] & 0xFFFF0000u) * qmul[h]);
          *reinterpret_cast<uint4*>(sQ + swz<D>(r, QC * (lane % 4) + i)) = make_uint4(o[0], o[1], o[2], o[3]);
        }
      }
    }
    __syncthreads();  // the f16 rows, for every warp's products
    if constexpr (TR) {  // (derived above for rows lane / 4 + 8 h; TR's rows are 2 (lane % 4) + h)
      const float row0_mul = gpu::shfl(s_mul_row[0], 8 * (lane & 3));
      const float row1_mul = gpu::shfl(s_mul_row[0], 8 * (lane & 3) + 4);
      s_mul_row[0] = row0_mul;
      s_mul_row[1] = row1_mul;
    }
  }
  // TR: Q^T's B fragments for all D / 16 k-steps (rows 0-7 of the permuted queries: k-step ks is
  // chunks 2 ks and 2 ks + 1), read once. (The queries have landed: the kRegFp8 stores sit before
  // the first barrier above.)
  uint32_t qT[TR ? D / 16 : 1][2];
  if constexpr (TR) {
#pragma unroll
    for (int c = 0; c < 2 * (D / 16); c += 4) {
      uint32_t r4[4];
      ldmatrix_x4(r4, sQ + swz<D>(lane & 7, c + (lane >> 3)));
      qT[c / 2][0] = r4[0];
      qT[c / 2][1] = r4[1];
      qT[c / 2 + 1][0] = r4[2];
      qT[c / 2 + 1][1] = r4[3];
    }
  }
  const int q_row = wm * 16 + (lane & 15);
  for (int t = 0; t < num_tiles; ++t) {
    cp_async_wait<STAGES - 2>();  // stage t (and the queries) have landed for this thread
    __syncthreads();                  // ... for every thread; and stage t - 1 is free again
    const int next = t + STAGES - 1;
    if (next < num_tiles) issue_stage(next);
    cp_async_commit();
    const int pending_page = (tid < KT && next + 1 < num_tiles) ? lookup(next + 1) : 0;
    if constexpr (FP8 && !kRegFp8) {
      convert_stage(t);  // the barrier above: every warp is done reading the previous stage
      __syncthreads();
    }


    [[maybe_unused]] const T* sK = FP8 ? sStage : sStage + (t % STAGES) * 2 * KT * D;
    [[maybe_unused]] const T* sV = sK + KT * D;
    // (the register path reads stage t's fp8 bytes where they landed)
    [[maybe_unused]] const uint8_t* rawK = reinterpret_cast<const uint8_t*>(sRaw + (t % STAGES) * 2 * KT * D);
    [[maybe_unused]] const uint8_t* rawV = rawK + KT * D;
    const int tile_start = k_begin + t * KT;
    const int mask_slot = (t % C::kMaskSlots) * 2;
    const uint64_t bad_keys =
        sBadKeys[mask_slot] | (KT > 32 ? uint64_t(sBadKeys[mask_slot + 1]) << 32 : uint64_t(0));
    if (bad_keys != 0) {  // rare: does a row's visible range in this stage hold a marked key?
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int lo = max(vis_b[h] - tile_start, 0), hi = min(vis_e[h] - tile_start, KT);
        if (hi > lo && ((bad_keys >> lo) & (~uint64_t(0) >> (64 - (hi - lo)))) != 0) bad_rows |= 1 << h;
      }
    }
    if constexpr (TR) {
      const int key0 = wk * 16;
      const int kr = key0 + (lane & 7) + ((lane >> 3) & 1) * 8;  // this lane's ldmatrix row (K and V)
      float s[4] = {0.f, 0.f, 0.f, 0.f};  // S^T: keys lane / 4 (s[0..1]) and + 8 (s[2..3])
#pragma unroll
      for (int ks = 0; ks < D / 16; ks += 2) {
        // Matrices: keys 0-7 and 8-15 of chunk ks, then of chunk ks + 1: a lane's word is 4 bytes
        // of key lane / 4 (or + 8), the A fragment's pairs of logical dims 2q and 8 + 2q.
        uint32_t raw[4];
        ldmatrix_x4(raw, rawK + raw_at(kr, ks + (lane >> 4)));
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          uint32_t a[4];
          fp8x4_to_half2x2_bits<E5M2>(raw[2 * i], a[0], a[2]);
          fp8x4_to_half2x2_bits<E5M2>(raw[2 * i + 1], a[1], a[3]);
          mma_16816<M>(s, a, qT[ks + i]);
        }
      }
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e & 1;
        const int j = tile_start + key0 + (lane >> 2) + 8 * (e >> 1);
        const float v = score(s[e], h, j);
        s[e] = v;
        mx[h] = fmaxf(mx[h], v);
      }
      float corr[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // a row's 16 keys lie across the 8 lanes of equal lane % 4
        mx[h] = fmaxf(mx[h], gpu::shfl_xor(mx[h], 4));
        mx[h] = fmaxf(mx[h], gpu::shfl_xor(mx[h], 8));
        mx[h] = fmaxf(mx[h], gpu::shfl_xor(mx[h], 16));
        corr[h] = advance_max(h, mx[h]);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e & 1;
        const float pv = m[h] == -INFINITY ? 0.f : fast_exp2(s[e] - m[h]);
        s[e] = pv;
        l[h] += pv;
      }
      if (gpu::any(corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
        for (int n = 0; n < NACC; ++n) {
          acc[n][0] *= corr[0];
          acc[n][1] *= corr[1];
          acc[n][2] *= corr[0];
          acc[n][3] *= corr[1];
        }
      }
      // P^T's fragments as 8x8 matrices [key][row] (keys 0-7, then 8-15), transposed: O^T's B.
      const uint32_t pb[2] = {movmatrix_trans(pack2<M>(s[0], s[1])), movmatrix_trans(pack2<M>(s[2], s[3]))};
#pragma unroll
      for (int c = 0; c < NACC; c += 2) {
        // As the plain path's V loads; a0 / a1 = dim rows of chunks c / c + 1 of this warp's
        // columns, a2 / a3 = keys + 8.
        uint32_t raw[4];
        ldmatrix_x4_trans(raw, rawV + raw_at(kr, (WD == 1 ? 0 : col0 / 16) + c + (lane >> 4)));
        uint32_t even[4], odd[4];
        fp8_v_word_to_even_odd<E5M2>(raw[0], even[0], odd[0]);
        fp8_v_word_to_even_odd<E5M2>(raw[2], even[1], odd[1]);
        fp8_v_word_to_even_odd<E5M2>(raw[1], even[2], odd[2]);
        fp8_v_word_to_even_odd<E5M2>(raw[3], even[3], odd[3]);
        mma_16816<M>(acc[c], even, pb);
        mma_16816<M>(acc[c + 1], odd, pb);
      }
    } else {
#pragma unroll
      for (int sub = 0; sub < KW; sub += SUB) {
        const int key0 = wk * KW + sub;  // first key of this step, within the stage
        float s[SUB / 8][4];
#pragma unroll
        for (int n = 0; n < SUB / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
        if constexpr (kRegFp8) {
#pragma unroll
          for (int ks = 0; ks < D / 16; ks += 4) {  // four k-steps: one ldmatrix_x4 of bytes per key tile
            uint32_t a[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i) ldmatrix_x4(a[i], sQ + swz<D>(q_row, (ks + i) * 2 + (lane >> 4)));
#pragma unroll
            for (int n = 0; n < SUB / 8; ++n) {
              const int kr = key0 + n * 8 + (lane & 7);
              uint32_t raw[4];  // matrix i: k-step ks + i (one 16-byte chunk of each of 8 keys)
              ldmatrix_x4(raw, rawK + raw_at(kr, ks + (lane >> 3)));
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                uint32_t bf[2];  // (M is float16 here: the half2 bits are the operand)
                fp8x4_to_half2x2_bits<E5M2>(raw[i], bf[0], bf[1]);
                mma_16816<M>(s[n], a[i], bf);
              }
            }
          }
        } else {
#pragma unroll
          for (int ks = 0; ks < D / 16; ks += 2) {
            uint32_t a0[4], a1[4];
            ldmatrix_x4(a0, sQ + swz<D>(q_row, ks * 2 + (lane >> 4)));
            ldmatrix_x4(a1, sQ + swz<D>(q_row, ks * 2 + 2 + (lane >> 4)));
#pragma unroll
            for (int n = 0; n < SUB / 8; ++n) {
              const int kr = key0 + n * 8 + (lane & 7);
              uint32_t bf[4];
              ldmatrix_x4(bf, sK + swz<D>(kr, ks * 2 + (lane >> 3)));
              mma_16816<T>(s[n], a0, bf);
              mma_16816<T>(s[n], a1, bf + 2);
            }
          }
        }

        // Scale, cap, mask; then the online softmax of this thread's two rows (a row's 8-key
        // columns are spread over the 4 lanes of a quad).
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < SUB / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e >> 1;
            const int j = tile_start + key0 + n * 8 + (lane & 3) * 2 + (e & 1);
            const float v = score(s[n][e], h, j);
            s[n][e] = v;
            mx[h] = fmaxf(mx[h], v);
          }
        }
        float corr[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          mx[h] = fmaxf(mx[h], gpu::shfl_xor(mx[h], 1));
          mx[h] = fmaxf(mx[h], gpu::shfl_xor(mx[h], 2));
          corr[h] = advance_max(h, mx[h]);
        }
#pragma unroll
        for (int n = 0; n < SUB / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e >> 1;
            const float pv = m[h] == -INFINITY ? 0.f : fast_exp2(s[n][e] - m[h]);
            s[n][e] = pv;
            l[h] += pv;  // this thread's share of the row sum; the quad is summed at the end
          }
        }
        // Once a row's maximum has settled (most steps of a long decode sequence) every factor is 1:
        // small tiles skip the NT x 4 multiplies (the test is warp-uniform, so the mma below stay
        // converged). Not in the large-tile instance: there it made ptxas spill.
        if (WM == 4 || gpu::any(corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            acc[n][0] *= corr[0];
            acc[n][1] *= corr[0];
            acc[n][2] *= corr[1];
            acc[n][3] *= corr[1];
          }
        }

        // O += P V: P's accumulator fragments are the A fragments (16 keys per k-step); V is read
        // transposed from the [key][D] stage.
#pragma unroll
        for (int kk = 0; kk < SUB / 16; ++kk) {
          uint32_t a[4];
          a[0] = pack2<M>(s[2 * kk][0], s[2 * kk][1]);
          a[1] = pack2<M>(s[2 * kk][2], s[2 * kk][3]);
          a[2] = pack2<M>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
          a[3] = pack2<M>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
          const int vr = key0 + kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
          if constexpr (kRegFp8) {
            // Matrices: keys 0-7 and 8-15 of chunk c, then of chunk c + 1 (16 dims each). A lane's
            // register holds keys 2q, 2q+1 x dims 2g, 2g+1 (q = lane % 4, g = lane / 4): its bytes
            // 0 and 2 are the even-dim tile's B pair, 1 and 3 the odd-dim tile's.
#pragma unroll
            for (int c = 0; c < D / 16; c += 2) {
              uint32_t raw[4];
              ldmatrix_x4_trans(raw, rawV + raw_at(vr, c + (lane >> 4)));
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                uint32_t even[2], odd[2];  // (M is float16 here: the half2 bits are the operand)
                fp8_v_word_to_even_odd<E5M2>(raw[2 * h], even[0], odd[0]);
                fp8_v_word_to_even_odd<E5M2>(raw[2 * h + 1], even[1], odd[1]);
                mma_16816<M>(acc[2 * (c + h)], a, even);
                mma_16816<M>(acc[2 * (c + h) + 1], a, odd);
              }
            }
          } else {
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
              uint32_t bf[4];
              ldmatrix_x4_trans(bf, sV + swz<D>(vr, col0 / 8 + n + (lane >> 4)));
              mma_16816<T>(acc[n], a, bf);
              mma_16816<T>(acc[n + 1], a, bf + 2);
            }
          }
        }
      }
    }
    // Slot (t + STAGES) % STAGES held stage t, whose copies were issued before this iteration's
    // barrier; stage t + STAGES reads it after the next one.
    // Its mask goes to slot (t + STAGES) % (STAGES + 1), stage t - 1's: every warp finished
    // reading that one before this iteration's barrier.
    if (tid < KT) publish_pages(t + STAGES, pending_page);
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages

#pragma unroll
  for (int h = 0; h < 2; ++h) {  // (a row's lanes: a quad; TR: the 8 lanes of equal lane % 4)
    l[h] += gpu::shfl_xor(l[h], TR ? 4 : 1);
    l[h] += gpu::shfl_xor(l[h], TR ? 8 : 2);
    if (TR) l[h] += gpu::shfl_xor(l[h], 16);
  }

  const int64_t num_rows = p.num_tokens * p.num_q_heads;
  auto out_row = [&](int r) {  // global output row of tile row r
    const int64_t rr = row0 + r;
    return (q_begin + rr / G) * p.num_q_heads + int64_t(kv_head) * G + rr % G;
  };
  const float v_mul = FP8 ? opt.v_scale : 1.f;  // a value is v_cache * v_scale
  // The output column of accumulator acc[n][2 h + e] (the register path's tiles: see kRegFp8).
  auto acc_col = [&](int n, int e) {
    return kRegFp8 ? col0 + 16 * (n / 2) + 4 * (lane & 3) + 2 * e + (n & 1) : col0 + n * 8 + (lane & 3) * 2 + e;
  };
  auto store = [&](int64_t row, int d, float o) {
    if (num_splits == 1) static_cast<T*>(p.out)[row * D + d] = from_float<T>(o);
    else ws_out[(split * num_rows + row) * D + d] = o;
  };
  auto store_lse = [&](int64_t row, float v) {
    if (num_splits == 1) p.lse[row] = v;
    else ws_lse[split * num_rows + row] = v;
  };

  if constexpr (WK == 1 && WD == 1) {
    // Each warp owns its rows: normalise and write from registers.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r_lo + 8 * h;
      if (r >= rows_here) continue;
      const int64_t row = out_row(r);
      // A NaN sum (a NaN read from a key the row sees) stays NaN, as a marked key does.
      const bool bad = ((bad_rows >> h) & 1) || isnan(l[h]);
      const float inv = l[h] > 0.f ? v_mul / l[h] : 0.f;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        store(row, acc_col(n, 0), bad ? NAN : acc[n][2 * h] * inv);
        store(row, acc_col(n, 1), bad ? NAN : acc[n][2 * h + 1] * inv);
      }
      if ((lane & 3) == 0) {
        store_lse(row, bad ? NAN : (l[h] > 0.f ? (m[h] + __log2f(l[h])) * kLn2 : -INFINITY));
      }
    }
  } else {
    // The WK key groups hold the same 16 rows over different keys (each over its WD column
    // slices): merge through shared memory.
    float* sAcc = reinterpret_cast<float*>(sStage);  // [WK][16][D]
    float* sM = sAcc + WK * 16 * D;                  // [WK][16]
    float* sL = sM + WK * 16;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row_of(h);
      if constexpr (!TR) {
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          sAcc[(wk * 16 + r) * D + acc_col(n, 0)] = acc[n][2 * h];
          sAcc[(wk * 16 + r) * D + acc_col(n, 1)] = acc[n][2 * h + 1];
        }
      }
      if ((TR ? lane < 4 : (lane & 3) == 0) && wd == 0) {
        sM[wk * 16 + r] = m[h];
        sL[wk * 16 + r] = ((bad_rows >> h) & 1) ? NAN : l[h];  // NaN marks the row bad
      }
    }
    if constexpr (TR) {  // (O^T's layout: see TR)
#pragma unroll
      for (int n = 0; n < NACC; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int d = (WD == 1 ? 0 : col0) + 16 * (n & ~1) + 16 * (i >> 1) + 2 * (lane >> 2) + (n & 1);
          sAcc[(wk * 16 + row_of(i & 1)) * D + d] = acc[n][i];
        }
      }
    }
    __syncthreads();
    for (int i = tid; i < rows_here * D; i += kTileThreads) {
      const int r = i / D, d = i % D;
      float m_all = -INFINITY;
#pragma unroll
      for (int w = 0; w < WK; ++w) m_all = fmaxf(m_all, sM[w * 16 + r]);
      float l_all = 0.f, a_all = 0.f;
#pragma unroll
      for (int w = 0; w < WK; ++w) {
        const float c = rescale(sM[w * 16 + r], m_all);
        l_all += sL[w * 16 + r] * c;
        a_all += sAcc[(w * 16 + r) * D + d] * c;
      }
      const int64_t row = out_row(r);
      const bool bad = isnan(l_all);
      store(row, d, bad ? NAN : (l_all > 0.f ? a_all * v_mul / l_all : 0.f));
      if (d == 0) {
        store_lse(row, bad ? NAN : (l_all > 0.f ? (m_all + __log2f(l_all)) * kLn2 : -INFINITY));
      }
    }
  }
}

// Pure decode over more than one wave of blocks with no tile list (the launcher's choice, without
// a plan, up to its kListFreeSeqs sequences; this function holds up to kOrderMaxSeqs): block
// position `rank` (counted in sequences) runs the sequence that the list would put there -
// tile_schedule.cuh's longest-first order by length bucket; within a bucket, by index, where the
// list's order is arbitrary - found by every block for itself from kv_lens, so the call needs no
// list kernel in front of this one (NOTES items 58-59). Lengths all in the longest's bucket (all
// equal, say) leave sequence order after one reduction. All threads call;
// `scratch` is shared memory the block does not use yet (kLengthBuckets + 8 ints; the scans use
// it rather than block_scan.cuh's static array, which would add to every instance's footprint).
__device__ __forceinline__ int seq_in_length_order(const PagedAttentionParams& p, int rank, int* scratch) {
  constexpr int kPer = kOrderMaxSeqs / kTileThreads;
  const int S = int(p.num_seqs), tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (S > kOrderMaxSeqs) return rank;  // (the launcher lists those; before any barrier, uniform)
  const int64_t capacity = p.max_pages * p.page_size;
  int* hist = scratch;                    // [kLengthBuckets]
  int* red = scratch + kLengthBuckets;    // [4 warps][2]: maxima and minima of the lengths
  // Exclusive prefix sum of v over the block, the total in *total (all threads call; red[4..7]).
  auto scan = [&](int v, int* total) {
    int x = v;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const int y = gpu::shfl_up(x, off);
      if (lane >= off) x += y;
    }
    __syncthreads();  // (red's earlier readers are done)
    if (lane == 31) red[4 + warp] = x;
    __syncthreads();
    int before = 0, all = 0;
#pragma unroll
    for (int w = 0; w < kTileThreads / 32; ++w) before += w < warp ? red[4 + w] : 0, all += red[4 + w];
    *total = all;
    return before + x - v;
  };
  int len[kPer];  // sequence tid + i * kTileThreads (-1 past the end)
  int mx = 1, mn = INT32_MAX;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int s = tid + i * kTileThreads;
    len[i] = s < S ? int(clamp_kv_len(p.kv_lens[s], capacity)) : -1;
    if (s < S) mx = max(mx, len[i]), mn = min(mn, len[i]);
  }
  for (int b = tid; b < kLengthBuckets; b += kTileThreads) hist[b] = 0;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    mx = max(mx, gpu::shfl_xor(mx, off));
    mn = min(mn, gpu::shfl_xor(mn, off));
  }
  if (lane == 0) red[2 * warp] = mx, red[2 * warp + 1] = mn;
  __syncthreads();
  int top = 1, low = INT32_MAX;
#pragma unroll
  for (int w = 0; w < kTileThreads / 32; ++w) top = max(top, red[2 * w]), low = min(low, red[2 * w + 1]);
  if (length_bucket(low, top) == 0) {  // every length in the longest's bucket: sequence order
    __syncthreads();  // (everyone has read red: the caller reuses the scratch)
    return rank;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (len[i] >= 0) atomicAdd(&hist[length_bucket(len[i], top)], 1);
  }
  __syncthreads();
  // The bucket holding position `rank`, and the rank within it.
  static_assert(kLengthBuckets == 2 * kTileThreads, "two buckets a thread");
  const int n0 = hist[2 * tid], n1 = hist[2 * tid + 1];
  int all;
  const int before = scan(n0 + n1, &all);
  if (tid == 0) red[2] = rank;  // (found below; kept should kv_lens change under the block)
  if (before <= rank && rank < before + n0) red[0] = 2 * tid, red[1] = rank - before;
  if (before + n0 <= rank && rank < before + n0 + n1) red[0] = 2 * tid + 1, red[1] = rank - before - n0;
  __syncthreads();
  const int bucket = red[0], within = red[1];
  // The within-th sequence of that bucket, by index: a running count over the sequences in
  // index order (pass i holds sequences i * kTileThreads .. + kTileThreads - 1).
  int seen = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (i * kTileThreads >= S || seen > within) break;  // (block-uniform: found, or past the end)
    const bool in = len[i] >= 0 && length_bucket(len[i], top) == bucket;
    int n;
    const int at = seen + scan(in ? 1 : 0, &n);
    if (in && at == within) red[2] = tid + i * kTileThreads;
    seen += n;
  }
  __syncthreads();
  const int seq = red[2];
  __syncthreads();  // the caller's next use of the scratch
  return seq;
}

// The list entry that block position `pos` runs: the large tiles sit at positions
// floor(k * total / n_large), spread evenly among the small ones (tile_schedule.cuh); the small
// tiles fill the other positions in list order. Returns the entry index, or -1 past the end.
__device__ __forceinline__ int64_t tile_at(int64_t pos, int64_t n_large, int64_t total) {
  if (pos >= total) return -1;
  if (n_large == 0) return pos;
  const int64_t k = (pos * n_large + total - 1) / total;  // large positions before pos
  if (k < n_large && k * total / n_large == pos) return k;
  return n_large + pos - k;
}

constexpr int kPadRowsPerBlock = kTileThreads / 32;  // padding tokens a clearing block takes at a time

// Padding rows (tokens of a ragged call that no sequence owns): output 0 and lse -inf, as the
// reference defines them; with KV splits, every split's lse -inf instead (the merge then writes
// them). Block `index` of `count` clearing blocks; one warp per token.
template <typename T>
__device__ void clear_padding_rows(const PagedAttentionParams& p, int64_t index, int64_t count, int num_splits,
                                   float* __restrict__ ws_lse) {
  const int lane = threadIdx.x % 32;
  const int64_t num_rows = p.num_tokens * p.num_q_heads;
  for (int64_t t = index * kPadRowsPerBlock + threadIdx.x / 32; t < p.num_tokens; t += count * kPadRowsPerBlock) {
    int64_t seq, q_begin, q_len;
    if (find_sequence(p.cu_q_lens, p.num_seqs, p.num_tokens, t, &seq, &q_begin, &q_len)) continue;
    for (int64_t h = 0; h < p.num_q_heads; ++h) {
      const int64_t row = t * p.num_q_heads + h;
      if (num_splits == 1) {
        for (int64_t d = lane; d < p.head_dim; d += 32) static_cast<T*>(p.out)[row * p.head_dim + d] = from_float<T>(0.f);
        if (lane == 0) p.lse[row] = -INFINITY;
      } else {
        for (int k = lane; k < num_splits; k += 32) ws_lse[k * num_rows + row] = -INFINITY;
      }
    }
  }
}

// Grid: x = list position x KV head (head fastest) for the first tile_blocks blocks, then the
// blocks that clear padding rows; y = KV split. `work` is a tile list as
// paged_tile_schedule_kernel writes it ([n_large, total, (seq, tile word) pairs...]: the call's
// own, or a plan's), or null for pure decode without one: in sequence order (one wave), or in
// length order when `by_length` (seq_in_length_order). A plan is caller data: its header is
// clamped to the list's capacity and its entries are checked, so a wrong one costs rows their
// values (never an access out of bounds). `transposed`: the fp8 register path's tiles of at most 8
// rows may run attend_tile's TR. DTR (TileConfig): every tile runs TR; any other returns.
template <typename T, int D, bool LARGE, bool FP8, bool DTR = false>
__global__ void __launch_bounds__(kTileThreads, TileConfig<D, LARGE, FP8, DTR>::kMinBlocks)
    paged_tile_kernel(const PagedAttentionParams p, int page_shift, const int32_t* __restrict__ work,
                      int by_length, int transposed, int64_t tile_blocks, float* __restrict__ ws_out,
                      float* __restrict__ ws_lse) {
  extern __shared__ __align__(16) unsigned char smem[];
  // A dependent launch on Hopper (dependent_launches): nothing is read or written before the
  // kernel ahead (the tile schedule, or what wrote q / the caches / the outputs) is done.
  pdl_wait();
  if (blockIdx.x >= tile_blocks) {
    if (blockIdx.y == 0) clear_padding_rows<T>(p, blockIdx.x - tile_blocks, gridDim.x - tile_blocks, gridDim.y, ws_lse);
    return;
  }
  const int kv_head = int(blockIdx.x % p.num_kv_heads);
  const int64_t group = p.num_q_heads / p.num_kv_heads;
  int seq, tile;
  bool large;
  if (work == nullptr) {  // pure decode without a list (the launcher's choice)
    const int64_t per_seq = tiles_of_rows(group);
    const int64_t pos = blockIdx.x / p.num_kv_heads;
    seq = int(pos / per_seq);
    tile = int(pos % per_seq);
    large = is_large_tile(group);
    if (seq >= p.num_seqs) return;
    // (a list holds large tiles in sequence order, so only small ones are reordered)
    if constexpr (!LARGE) {  // (pure decode's tiles are all large in a LARGE instance)
      if (by_length && !large) seq = seq_in_length_order(p, seq, reinterpret_cast<int*>(smem));
    }
  } else {
    const int64_t positions = tile_blocks / p.num_kv_heads;  // the list's capacity
    const int64_t total = min(max(int64_t(work[1]), int64_t(0)), positions);
    const int64_t e = tile_at(blockIdx.x / p.num_kv_heads, min(max(int64_t(work[0]), int64_t(0)), total), total);
    if (e < 0) return;
    seq = work[2 + 2 * e];
    if (seq < 0 || seq >= p.num_seqs) return;
    const int word = work[3 + 2 * e];
    large = (word & kLargeTileFlag) != 0;
    tile = word & (kLargeTileFlag - 1);
  }
  int q_begin = seq, q_len = 1;
  if (!p.decode_only) {
    q_begin = int(clamped_cu(p.cu_q_lens, seq, p.num_tokens));
    q_len = max(0, int(clamped_cu(p.cu_q_lens, seq + 1, p.num_tokens)) - q_begin);
  }
  if (int64_t(tile) * (large ? kLargeRows : kSmallRows) >= int64_t(q_len) * group) return;  // (no rows)
  if constexpr (LARGE) {
    if (large) {
      attend_tile<T, D, LARGE, FP8, 4>(p, page_shift, seq, q_begin, q_len, tile, kv_head, smem, ws_out, ws_lse);
      return;
    }
  }
  if (large) return;
  // (the fp8 format as a constant in the register path's math)
  if constexpr (TileConfig<D, LARGE, FP8>::kTransposedFp8) {
    // A tile of at most 8 rows runs the transposed products (attend_tile's TR): always in the DTR
    // instance, elsewhere unless the launcher says not to (JAXPAGED_PAGED_TRANSPOSED=0).
    if ((DTR || transposed) && int64_t(q_len) * group - int64_t(tile) * kSmallRows <= 8) {
      if (p.kv_e5m2) attend_tile<T, D, LARGE, FP8, 1, true, true, DTR>(p, page_shift, seq, q_begin, q_len, tile, kv_head, smem, ws_out, ws_lse);
      else attend_tile<T, D, LARGE, FP8, 1, false, true, DTR>(p, page_shift, seq, q_begin, q_len, tile, kv_head, smem, ws_out, ws_lse);
      return;
    }
  }
  // (DTR: a tile of more rows is unreachable, the launcher picks DTR for groups of <= 8)
  if constexpr (!DTR) {
    if constexpr (TileConfig<D, LARGE, FP8>::kRegFp8) {
      if (p.kv_e5m2) {
        attend_tile<T, D, LARGE, FP8, 1, true>(p, page_shift, seq, q_begin, q_len, tile, kv_head, smem, ws_out, ws_lse);
        return;
      }
    }
    attend_tile<T, D, LARGE, FP8, 1>(p, page_shift, seq, q_begin, q_len, tile, kv_head, smem, ws_out, ws_lse);
  }
}

}  // namespace jaxpaged
