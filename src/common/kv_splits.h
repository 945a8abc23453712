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
// 256 blocks, 2 splits 0.139 ms against 0.147 unsplit; NOTES item 76).
inline int choose_kv_splits(int64_t blocks_without_split, int cap, int64_t max_keys, int min_keys,
                            int64_t resident, int64_t overhead_keys = 256, int64_t sms = 0) {
  const int64_t by_keys = (max_keys + min_keys - 1) / min_keys;
  const int64_t limit = cap < by_keys ? cap : by_keys;
  if (sms > 0 && blocks_without_split >= sms && blocks_without_split <= resident) {
    const int64_t in_wave = resident / blocks_without_split;
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
