// How many blocks may share one query row's KV range (flash-decoding splits): the bound that
// sizes a call's workspace (from static shapes) and the count a launch picks (from the device).
// Plain host arithmetic, shared by the workspace layouts and the launchers of both ops.
#pragma once

#include <cstdint>

namespace jaxpaged {

constexpr int kMaxSplits = 64;  // combine_splits_kernel merges at most this many (two per lane)

// Upper bound on the splits of one row's keys, from shapes only: splitting pays when the grid
// without it leaves the GPU partly idle (too few blocks, or a last wave mostly empty; an H100
// holds about 400 of the paged kernel's blocks at once). The bound lets the grid grow to about
// 4096 blocks, each split keeping at least 128 keys. The launch picks the actual count, at most
// this, from the device's resident-block count (choose_kv_splits).
inline int kv_split_cap(int64_t parallel_blocks, int64_t max_keys) {
  const int64_t blocks = parallel_blocks > 1 ? parallel_blocks : 1;
  const int64_t keys = max_keys > 1 ? max_keys : 1;
  int64_t cap = (4096 + blocks - 1) / blocks;
  if (cap > kMaxSplits) cap = kMaxSplits;
  const int64_t by_keys = (keys + 127) / 128;
  if (cap > by_keys) cap = by_keys;
  return cap < 1 ? 1 : int(cap);
}

// Splits for occupancy, for choose_kv_splits' one-wave grids that fill more than half the wave
// (so no split keeps them in it) but whose blocks an SM stream too little of the SM's share of the
// memory bandwidth: two nearly full waves instead (the smallest count whose blocks fill at least 90%
// of two). Each block of the instance streams about `block_mbps` alone (a measured constant; 0: not
// known, no split), against the device's peak `device_mbps` (0: not known): the split is taken when
// the grid's blocks together stream under 70% of it (an SM's blocks under 70% of its share). A split
// costs partial results, a merge and a second wave's tail (about 10%): fp8 decode at Hq = 64, Hkv =
// 8, B = 32, ctx 8K on the H100 (256 blocks, 3 an SM, 10.1 GB/s each: 77% of its 25.4 GB/s share)
// lost 7% at 3 splits (NOTES item 39 d); fp8 D = 256 soft cap on the H200 (256 blocks, 3 an SM, 12.8 GB/s each: 67% of 37 GB/s)
// gained 15% (0.328 -> 0.279 ms, item 76 b; item 77 c's profile: latency-bound, 0.45 eligible
// warps; with this rule, session 53: 0.329 -> 0.277 ms per call, 323 -> 276 us per layer). On an
// H100 SXM (3.35 TB/s) it never fires for that instance: more than half its 396-block wave streams
// >= 198 x 12.8 GB/s, 76% of the peak. 1 where the rule does not apply.
inline int occupancy_kv_splits(int64_t blocks, int64_t limit, int64_t resident, int64_t device_mbps,
                               int64_t block_mbps) {
  if (device_mbps <= 0 || block_mbps <= 0 || 10 * blocks * block_mbps >= 7 * device_mbps) return 1;
  for (int64_t s = 2; s <= limit && blocks * s <= 2 * resident; ++s) {
    if (10 * blocks * s >= 9 * 2 * resident) return int(s);
  }
  return 1;
}

// How many KV splits to launch, up to `cap` and at most one split per `min_keys` keys. The grid
// runs in waves of `resident` blocks (SMs x blocks per SM); each wave lasts as long as one block's
// keys plus a fixed per-block cost (query load, pipeline fill and drain, the partial result and
// its share of the merge) worth about `overhead_keys` keys. Pick the count with the least modelled
// time, waves x (keys per split + overhead); ties go to fewer splits.
// (Until session 5 this picked the fullest waves, which on 64 blocks x 32K keys chose 33 splits in
// 8 waves of 1K-key blocks over 4 splits in one wave of 8K-key blocks: slower, see NOTES.md.)
// `sms` (0: not used): when the blocks without a split give every SM one and all fit one wave,
// only as many splits as keep the grid in that one wave (none when it is more than half full):
// the wave model above takes a block's time as fixed, but a bandwidth-bound block streams about
// its SM's share of memory bandwidth alone, so a split that adds a wave only adds partial
// results and a merge (paged fp8 decode, Hq=64 Hkv=8 B=32 ctx 8K on the H100 at 3 blocks an SM:
// 1 split 0.208 ms, the model's 3 splits 0.223; NOTES item 39), while one that fills the wave's
// empty slots adds blocks streaming at once (the same config on the H200 at 4 blocks an SM:
// 256 blocks, 2 splits 0.139 ms against 0.147 unsplit; NOTES item 76). A grid more than half the
// wave may still split for occupancy (`device_mbps`, `block_mbps`: occupancy_kv_splits).
inline int choose_kv_splits(int64_t blocks_without_split, int cap, int64_t max_keys, int min_keys,
                            int64_t resident, int64_t overhead_keys = 256, int64_t sms = 0,
                            int64_t device_mbps = 0, int64_t block_mbps = 0) {
  const int64_t by_keys = (max_keys + min_keys - 1) / min_keys;
  const int64_t limit = cap < by_keys ? cap : by_keys;
  if (sms > 0 && blocks_without_split >= sms && blocks_without_split <= resident) {
    const int64_t in_wave = resident / blocks_without_split;
    if (in_wave == 1) return occupancy_kv_splits(blocks_without_split, limit, resident, device_mbps, block_mbps);
    return int(in_wave < limit ? in_wave : (limit > 1 ? limit : 1));
  }
  auto cost = [&](int64_t s) {
    const int64_t waves = (blocks_without_split * s + resident - 1) / resident;
    return waves * ((max_keys + s - 1) / s + overhead_keys);
  };
  int64_t best = 1;
  for (int64_t s = 2; s <= limit; ++s) {
    if (cost(s) < cost(best)) best = s;
  }
  return int(best);
}

}  // namespace jaxpaged
