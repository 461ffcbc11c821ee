#pragma once
// The validation split: samples carved from a training split before it is
// written (`vitkd prepare ... --val-fraction F`), so that choices (schedules,
// teachers, recipes) are made on data that neither trains nor tests.
//
// Rule (stratified, deterministic): for each class k with n_k training
// samples, round(F * n_k) of them go to the validation split, chosen by a
// Fisher-Yates shuffle of that class's samples driven by the counter-based
// hash of (seed, "VAL", k, i) (util/hash.hpp), the same on every platform.
// Both splits keep the samples' original order. The file records the carve
// (data/dataset.hpp): /val/images, /val/labels, /val/source_indices (each
// validation sample's index in the uncarved training split) and the root
// attributes val_fraction, val_seed and val_rule.
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace vitkd {

/// The largest validation fraction `--val-fraction` accepts.
constexpr double kMaxValFraction = 0.5;
/// How the file's val_rule attribute describes the carve.
constexpr const char* kValRule =
    "stratified: round(val_fraction * n_k) samples of each class k, Fisher-Yates keyed on "
    "(val_seed, class); both splits in their original order";

struct ValCarve {
  DatasetSplit train, val;
  std::vector<int64_t> val_source;  ///< [n_val] each val sample's index in the uncarved train split
};

/// UserError (one line) unless 0 < fraction <= kMaxValFraction.
void check_val_fraction(double fraction);

/// Splits `train` (rows of `row` bytes) as the rule above says. UserError
/// (one line) when fraction is outside (0, kMaxValFraction] or the carve
/// leaves the validation split empty. `num_classes` bounds the labels.
ValCarve carve_validation(const DatasetSplit& train, int64_t row, int64_t num_classes, double fraction,
                          uint64_t seed);

/// The carve's record for write_dataset (fraction 0 = no validation split).
struct ValRecord {
  const ValCarve* carve = nullptr;
  double fraction = 0;
  uint64_t seed = 0;
};

}  // namespace vitkd
