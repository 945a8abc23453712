// The two-pass softmax of the CPU handlers: one query row's scores over its visible keys, then the
// softmax-weighted sum of their value rows, all in float32. Both handlers go through it, so they
// share one order of float operations (the max in the scoring pass, exp-sum and weighted sum in one
// second pass, then out = acc / l and lse = m + log(l)).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/host_float.h"

namespace jaxpaged {

class HostSoftmax {
 public:
  // dim: the width of a value row, which is also the width of an output row.
  explicit HostSoftmax(int64_t dim) : dim_(dim), acc_(dim) {}

  // A row with nothing to attend to: a visible key on a corrupt page (bad_page: NaN output and
  // lse, the loud signal a device op can give) or no visible key at all (zeros, lse = -inf).
  void empty_row(bool bad_page, void* out, int64_t row, float* lse, Dtype dt) const {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t d = 0; d < dim_; ++d) store_float(out, row * dim_ + d, bad_page ? nan : 0.f, dt);
    lse[row] = bad_page ? nan : -std::numeric_limits<float>::infinity();
  }

  // Output row `row` (dim values of dtype dt in out) and lse[row] of a query over n >= 1 keys:
  // score(i) is key i's final logit (scaled, soft-capped), values holds the n value rows, each
  // dim floats, back to back.
  template <class ScoreFn>
  void row(int64_t n, ScoreFn&& score, const float* values, void* out, int64_t row, float* lse, Dtype dt) {
    scores_.resize(n);
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      scores_[i] = score(i);
      m = std::fmax(m, scores_[i]);
    }
    float l = 0.f;
    std::fill(acc_.begin(), acc_.end(), 0.f);
    for (int64_t i = 0; i < n; ++i) {
      const float w = std::exp(scores_[i] - m);
      l += w;
      for (int64_t d = 0; d < dim_; ++d) acc_[d] += w * values[i * dim_ + d];
    }
    for (int64_t d = 0; d < dim_; ++d) store_float(out, row * dim_ + d, acc_[d] / l, dt);
    lse[row] = m + std::log(l);
  }

 private:
  int64_t dim_;
  std::vector<float> scores_, acc_;
};

}  // namespace jaxpaged
