// The one definition of which keys a query row sees, shared by the CPU handlers and the kernels.
// jaxpaged/reference.py states the same rule in jnp; the tests hold the two together.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/host_device.h"

namespace jaxpaged {

// Keys [begin, end) of a sequence that one query row attends to.
struct KeyRange {
  int64_t begin;
  int64_t end;
  JP_HOST_DEVICE bool empty() const { return end <= begin; }
};

// kv_len: the sequence's cache length, already clamped to [0, pages * page_size].
// q_len, pos: the query chunk is the last q_len tokens of the sequence; pos is the row's index in it.
// window: sliding window size, or <= 0 for none.
JP_HOST_DEVICE KeyRange visible_keys(int64_t kv_len, int64_t q_len, int64_t pos, int64_t window) {
  const int64_t last = kv_len - q_len + pos;  // the newest key this row may see (causal)
  KeyRange r;
  r.end = last + 1 < kv_len ? last + 1 : kv_len;
  r.begin = (window > 0 && last - window + 1 > 0) ? last - window + 1 : 0;
  return r;
}

JP_HOST_DEVICE int64_t clamp_kv_len(int64_t kv_len, int64_t capacity) {
  return kv_len < 0 ? 0 : (kv_len > capacity ? capacity : kv_len);
}

// Soft-capped score: c * tanh(s / c); soft_cap <= 0 means no cap.
JP_HOST_DEVICE float apply_soft_cap(float s, float soft_cap) {
  return soft_cap > 0.f ? soft_cap * tanhf(s / soft_cap) : s;
}

// cu_q_lens[i] clamped to [0, num_tokens]: the one reading of cu_q_lens every consumer shares.
JP_HOST_DEVICE int64_t clamped_cu(const int32_t* cu, int64_t i, int64_t num_tokens) {
  const int64_t c = cu[i];
  return c < 0 ? 0 : (c > num_tokens ? num_tokens : c);
}

// The sequence that query row t belongs to, from cu_q_lens (values clamped to [0, num_tokens]).
// Returns false for a padding row (no sequence holds it). cu_q_lens is meant to be
// non-decreasing; if it is not, the answer is some sequence or none, never an out-of-range one.
JP_HOST_DEVICE bool find_sequence(const int32_t* cu, int64_t num_seqs, int64_t num_tokens, int64_t t,
                                  int64_t* seq, int64_t* q_begin, int64_t* q_len) {
  auto at = [&](int64_t i) { return clamped_cu(cu, i, num_tokens); };
  int64_t lo = 0, hi = num_seqs;  // find the last s in [0, num_seqs) with cu[s] <= t
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (at(mid) <= t) lo = mid; else hi = mid;
  }
  if (num_seqs <= 0) return false;
  const int64_t b = at(lo), e = at(lo + 1);
  if (t < b || t >= e) return false;
  *seq = lo;
  *q_begin = b;
  *q_len = e - b;
  return true;
}

}  // namespace jaxpaged
