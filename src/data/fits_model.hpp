#pragma once
// The one check that a model shape can read a dataset (used for the trained
// model, the teacher checkpoint and `vitkd export --data`).
#include <string>

#include "data/dataset.hpp"
#include "model/vit.hpp"

namespace vitkd {

/// Square images of spec.image_size pixels, spec.channels channels and
/// spec.classes classes, or one UserError line
///   "WHO: PREFIXimage_size = 16 but the images in PATH are 8x8; FIX"
/// `key_prefix` names the fields as the user sets them (e.g. "model.");
/// an empty `fix` says "set it to <the dataset's value>".
void check_spec_fits_data(const ModelSpec& spec, const DatasetMeta& meta, const std::string& who,
                          const std::string& key_prefix, const std::string& fix = "");

}  // namespace vitkd
