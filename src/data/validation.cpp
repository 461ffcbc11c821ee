#include "data/validation.hpp"

#include <cmath>
#include <cstring>

#include "util/error.hpp"
#include "util/hash.hpp"

namespace vitkd {

void check_val_fraction(double fraction) {
  if (!(fraction > 0 && fraction <= kMaxValFraction))
    throw UserError("--val-fraction " + std::to_string(fraction) + " is outside (0, 0.5]; pick the "
                    "share of each class's training samples to hold out, e.g. --val-fraction 0.1");
}

ValCarve carve_validation(const DatasetSplit& train, int64_t row, int64_t num_classes, double fraction,
                          uint64_t seed) {
  check_val_fraction(fraction);
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(num_classes));
  for (int64_t i = 0; i < train.size(); ++i) by_class.at(static_cast<size_t>(train.labels[i])).push_back(i);
  std::vector<char> is_val(static_cast<size_t>(train.size()), 0);
  for (int64_t k = 0; k < num_classes; ++k) {
    std::vector<int64_t>& idx = by_class[static_cast<size_t>(k)];
    const int64_t n = static_cast<int64_t>(idx.size());
    for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates, counter-based
      std::swap(idx[i], idx[uniform_below(hash64(seed, 0x56414cULL /* "VAL" */, k, i), i + 1)]);
    const int64_t n_val = std::llround(fraction * double(n));
    for (int64_t j = 0; j < n_val; ++j) is_val[static_cast<size_t>(idx[j])] = 1;
  }
  ValCarve c;
  for (int64_t i = 0; i < train.size(); ++i) {
    DatasetSplit& to = is_val[static_cast<size_t>(i)] ? c.val : c.train;
    to.images.insert(to.images.end(), train.images.begin() + i * row, train.images.begin() + (i + 1) * row);
    to.labels.push_back(train.labels[i]);
    if (is_val[static_cast<size_t>(i)]) c.val_source.push_back(i);
  }
  if (c.val.size() == 0)
    throw UserError("--val-fraction " + std::to_string(fraction) + " of " + std::to_string(train.size()) +
                    " training samples leaves the validation split empty; raise it or use more data");
  return c;
}

}  // namespace vitkd
