// Test data for the data tests: a small dataset split whose pixels and labels
// are known from the sample index.
#pragma once

#include <algorithm>
#include <cstdint>

#include "data/dataset.hpp"

namespace vitkd::test {

// A small dataset: image i has every pixel = i % 256, label i % K.
inline void small_split(DatasetSplit& s, int64_t n, int64_t px, int64_t k) {
  s.images.resize(n * px);
  s.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    std::fill(s.images.begin() + i * px, s.images.begin() + (i + 1) * px, static_cast<uint8_t>(i % 256));
    s.labels[i] = static_cast<int32_t>(i % k);
  }
}

}  // namespace vitkd::test
